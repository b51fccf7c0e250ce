"""The words of the consolidation corpus (bench/consolidation_corpus.py) and how a statement
is written: subjects, predicates with their synonyms, the templates of attributes that change,
the pairs that look alike, and the person, hedges, fillers and case of a statement.

Part of the corpus's generator: fixed with it before any threshold was tuned, not to be
changed to fit them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NAMES = (
    "Anna Ben Carol Dan Eve Frank Gina Hugo Iris Jack Kira Liam Maya Noah Olga Paul Quinn Rosa "
    "Sam Tara Umar Vera Will Xena Yuki Zoe Aaron Bianca Chen Diana Elias Fatima Georg Hana Ivan "
    "Julia Kofi Lena Marco Nina Omar Priya Rafael Sofia Tomas Ursula Viktor Wen Yara Zane Alice "
    "Bruno Clara Dmitri Elena Felix Grace Hiro Ines Jonas"
).split()
USER = "the user"
USER_FORMS = ("the user", "User", "I")
SURNAMES = (
    "Novak Okafor Lindqvist Moreau Tanaka Silva Kowalski Haddad Jensen Romano Petrov Nguyen "
    "Fischer Costa Murphy Almeida Horvath Sato Dubois Weber Rossi Kaya Nowak Berg Santos Ivanova "
    "Keller Mendes Popescu Larsen Varga Ortiz Becker Hansen Yilmaz Schmidt Garcia Jovanovic"
).split()

# --- a) duplicates: predicates, habits, fillers ---


def options(text: str) -> tuple[str, ...]:
    """A tuple written as one string: "a | b | c"."""
    return tuple(text.split(" | "))


@dataclass(frozen=True)
class Family:
    """A predicate with its synonyms (third person) and the objects it takes; a single-valued
    one (residence) keys a subject's fact by the family alone, others by family and object."""

    name: str
    verbs: tuple[str, ...]
    objects: tuple[str, ...]
    single: bool = False


CITIES = options(
    "Berlin | Munich | Lisbon | Porto | Madrid | Seville | Paris | Lyon | Vienna | Prague | "
    "Krakow | Oslo | Bergen | Dublin | Leeds | York | Glasgow | Rotterdam | Utrecht | Ghent | "
    "Turin | Bologna | Zurich | Geneva | Helsinki | Tallinn | Riga | Toronto | Denver | Austin"
)
COMPANIES = options(
    "Acme | Globex | Initech | Umbrella | Soylent | Hooli | Stark | Wayne | Tyrell | Cyberdyne | "
    "Vandelay | Gringotts | Monarch | Aperture | Wonka | Oscorp | Nakatomi | Contoso"
)
ALLERGENS = options("peanuts | shellfish | penicillin | cats | pollen | gluten | latex | eggs")
FAMILIES = (
    Family(
        "likes",
        options("likes | enjoys | loves"),
        options(
            "hiking | sushi | jazz | board games | Italian food | gardening | sailing | "
            "horror films | spicy food | photography | rock climbing | crossword puzzles | "
            "opera | dark chocolate | bird watching | yoga | karaoke | pottery"
        ),
    ),
    Family("residence", options("lives in | resides in | is based in"), CITIES, single=True),
    Family("employer", options("works at | is employed at | has a job at"), COMPANIES, True),
    Family("allergy", options("is allergic to | has an allergy to"), ALLERGENS),
    Family("plays", ("plays",), options("the cello | the drums | the saxophone | the ukulele")),
    Family("learning", ("is learning",), options("Japanese | Portuguese | Korean | sign language")),
    Family("supports", ("supports",), options("Arsenal | Ajax | Celtic | Benfica | Napoli")),
    Family(
        "owns", ("owns",), options("a sailboat | a 3D printer | an electric bike | a food truck")
    ),
)
SYNONYMOUS = tuple(f for f in FAMILIES if len(f.verbs) > 1)
HABITS = tuple(  # activity, adverbial: the facts a clause can be moved in
    tuple(habit.split(" / "))
    for habit in options(
        "goes skiing / in winter | goes swimming / on Saturdays | drinks green tea / in the morning"
        " | goes to the gym / after work | calls home / every Sunday | visits the farmers' market"
        " / on weekends | plays chess / on Tuesday evenings | bakes bread / on Sundays | goes "
        "running / before breakfast | reads the news / over breakfast | volunteers at the animal "
        "shelter / once a month | takes the train to work / on weekdays | cycles to the office / "
        "in summer | meditates / before bed | goes camping / every August | practises the piano "
        "/ in the evenings"
    )
)
FILLERS = ("User mentioned that ", "The user said that ", "Note: ", "Remember: ", "Fact: ")
USER_FILLERS = ("Note: ", "Remember: ", "Fact: ", "Worth remembering: ")
HEDGES = ("really", "definitely", "actually", "apparently")
STYLES = ("lower", "no_period", "lower_no_period", "exclamation")

# --- b) updates: attributes that change ---


@dataclass(frozen=True)
class Change:
    """An attribute that changes: older and newer statements, the question that asks for it.
    Templates: {S} the subject, {S's} its possessive, {their}, {v:verb} a verb in the subject's
    person, {old} / {new} the values, {a_old} / {a_new} with their article."""

    attribute: str
    values: tuple[str, ...]  # the values a pair draws two of (or from ``pairs``, or drawn)
    old: tuple[str, ...]
    new: tuple[str, ...]
    query: str
    pairs: tuple[tuple[str, str], ...] = ()  # (older, newer) values: a pair draws one of them


def pairs(text: str) -> tuple[tuple[str, str], ...]:
    """ "a > b | c > d": the pairs (a, b), (c, d)."""
    return tuple((old, new) for old, new in (p.split(" > ") for p in options(text)))


CHANGES = (
    Change(
        "residence",
        CITIES,
        options("{S} {v:lives} in {old}. | {S} {v:is} based in {old}. | {S} {v:resides} in {old}."),
        options(
            "{S} moved to {new}. | {S} {v:has} moved to {new}. | {S} now {v:lives} in {new}. | "
            "{S} relocated from {old} to {new}."
        ),
        "Where does {S} live?",
    ),
    Change(
        "employer",
        COMPANIES,
        options(
            "{S} {v:works} at {old}. | {S} {v:is} employed at {old}. | {S} {v:has} a job at {old}."
        ),
        options(
            "{S} now {v:works} at {new}. | {S} left {old} and joined {new}. | {S} started a new "
            "job at {new}. | {S} switched jobs and now {v:works} at {new}."
        ),
        "Where does {S} work?",
    ),
    Change(
        "favourite colour",
        options("blue | green | red | yellow | purple | orange | teal | black"),
        options("{S's} favourite colour is {old}. | {S's} favorite color is {old}."),
        options(
            "{S's} favourite colour is now {new}. | {S's} favourite colour changed to {new}. | "
            "{S} {v:says} {their} favourite colour is {new} these days."
        ),
        "What is {S's} favourite colour?",
    ),
    Change(
        "relationship",
        (),
        options("{S} {v:is} {old}. | {S's} relationship status is {old}."),
        options(
            "{S} {v:is} {new} now. | {S} {v:is} now {new}. | {S's} relationship status is {new}."
        ),
        "What is {S's} relationship status?",
        pairs(
            "single > in a relationship | in a relationship > engaged | engaged > married | "
            "married > separated | separated > divorced | divorced > in a relationship"
        ),
    ),
    Change(
        "job title",
        (),
        options("{S} {v:works} as {a_old}. | {S} {v:is} {a_old}."),
        options(
            "{S} was promoted to {new}. | {S} {v:is} now {a_new}. | {S} {v:works} as {a_new} now."
        ),
        "What is {S's} job title?",
        pairs(
            "junior developer > senior developer | nurse > head nurse | teacher > deputy head "
            "teacher | sales assistant > store manager | analyst > senior analyst | PhD student "
            "> postdoctoral researcher | intern > software engineer | line cook > sous chef"
        ),
    ),
    Change(
        "phone number",
        (),  # drawn: 555-0100 ... 555-0199
        options("{S's} phone number is {old}. | {S} can be reached at {old}."),
        options(
            "{S's} new phone number is {new}. | {S} changed {their} phone number to {new}. | "
            "{S's} phone number is now {new}."
        ),
        "What is {S's} phone number?",
    ),
    Change(
        "car",
        options(
            "a Toyota Corolla | a Volkswagen Golf | a Tesla Model 3 | a Honda Civic | "
            "a Ford Fiesta | a Volvo XC60 | a Renault Clio | a Mazda MX-5 | a Fiat 500"
        ),
        options("{S} {v:drives} {old}. | {S's} car is {old}."),
        options(
            "{S} now {v:drives} {new}. | {S} sold {their} car and bought {new}. | {S} traded in "
            "{old} for {new}. | {S's} new car is {new}."
        ),
        "What car does {S} drive?",
    ),
    Change(
        "diet",
        options("vegetarian | vegan | pescatarian | flexitarian"),
        options("{S} {v:is} {old}. | {S} {v:follows} {a_old} diet."),
        options(
            "{S} {v:is} {new} now. | {S} went {new}. | {S} {v:has} become {new}. | "
            "{S} switched from {a_old} to {a_new} diet."
        ),
        "What diet does {S} follow?",
    ),
    Change(
        "age",
        (),  # drawn: 19 ... 70, then one more
        options("{S} {v:is} {old} years old. | {S} {v:is} {old}."),
        options(
            "{S} turned {new}. | {S} {v:is} {new} now. | {S} just had a birthday and {v:is} {new}."
        ),
        "How old is {S}?",
    ),
    Change(
        "dog's name",
        options("Rex | Bella | Max | Luna | Milo | Charlie | Coco | Pepper | Biscuit | Oscar"),
        options("{S's} dog is called {old}. | {S} {v:has} a dog named {old}."),
        options("{S} renamed {their} dog {new}. | {S's} dog is now called {new}."),
        "What is {S's} dog called?",
    ),
    Change(
        "favourite food",
        options("pizza | ramen | tacos | paella | curry | lasagne | dumplings | falafel"),
        options("{S's} favourite food is {old}. | {S} {v:says} {their} favourite food is {old}."),
        options("{S's} favourite food is now {new}. | These days {S's} favourite food is {new}."),
        "What is {S's} favourite food?",
    ),
    Change(
        "studies",
        options(
            "biology | chemistry | law | economics | history | computer science | architecture | "
            "medicine"
        ),
        options("{S} {v:studies} {old}. | {S} {v:is} studying {old}."),
        options(
            "{S} switched to studying {new}. | {S} now {v:studies} {new}. | "
            "{S} changed {their} major from {old} to {new}."
        ),
        "What does {S} study?",
    ),
)
# --- c) similar-but-distinct: pairs that look alike ---

QUALIFIED = tuple(  # family, verb, object, qualifier
    tuple(q.split(" / "))
    for q in options(
        "likes / likes / hiking / in winter | likes / likes / jazz / from the fifties | "
        "plays / plays / tennis / with colleagues on Fridays | drinks / drinks / coffee / with "
        "oat milk | reads / reads / crime novels / in Swedish | cooks / cooks / Italian food / "
        "for friends | listens / listens to / podcasts / while running | watches / watches / "
        "football / at the pub | paints / paints / landscapes / in watercolour | writes / writes "
        "/ poetry / in French | goes / goes / climbing / indoors | collects / collects / vinyl "
        "records / from the seventies"
    )
)
RELATIVES = pairs(
    "sister > brother | mother > father | son > daughter | aunt > uncle | "
    "grandmother > grandfather | best friend > flatmate"
)
PROFESSIONS = options(
    "a nurse | an architect | a pilot | a plumber | a lawyer | a baker | a dentist | an engineer"
)
SHARED = (  # attribute, verb, objects: a predicate two subjects can share
    ("residence", "lives in", CITIES),
    ("employer", "works at", COMPANIES),
    ("profession", "is", PROFESSIONS),
)
MULTI = (  # family, verb, values: both values of one subject hold at once
    (
        "speaks",
        "speaks",
        options("French | German | Spanish | Italian | Mandarin | Arabic | Dutch"),
    ),
    ("plays", "plays", options("the guitar | the piano | the violin | the flute | the trumpet")),
    ("allergy", "is allergic to", ALLERGENS),
    (
        "pet",
        "has",
        options("a dog named Rex | a cat named Tom | a dog named Bruno | a cat named Mimi"),
    ),
    ("child", "has", options("a daughter named Mia | a son named Leo | a daughter named Ella")),
)
PLACES = options("Rome | Kyoto | Cairo | Lima | Reykjavik | Marrakesh | Hanoi | Athens")
MARATHONS = options("Berlin | Boston | London | Chicago | Tokyo | New York")
BANDS = options("Radiohead | Coldplay | Metallica | Adele | Daft Punk | Beyonce | Muse")


# --- how a statement is written ---


@dataclass(frozen=True)
class Subject:
    """Who a statement is about, as written: a name, a relative of someone, or the user in
    one of its forms."""

    name: str  # the canonical name: "Carol", "Carol Novak", "the user"
    form: str = ""  # the user as written: "the user", "User" or "I"
    relative: str = ""  # "sister": the statement is about the sister of ``name``

    @property
    def key(self) -> str:
        return f"{self.name}'s {self.relative}" if self.relative else self.name

    @property
    def first_person(self) -> bool:
        return self.form == "I" and not self.relative

    @property
    def text(self) -> str:
        owner = self.form or self.name
        if self.relative:
            return f"{possessive(owner)} {self.relative}"
        return owner

    @property
    def possessive(self) -> str:
        return possessive(self.text)

    @property
    def their(self) -> str:
        return "my" if self.first_person else "their"

    def verb(self, phrase: str) -> str:
        return in_first_person(phrase) if self.first_person else phrase


def possessive(who: str) -> str:
    return "my" if who == "I" else f"{who}'s"


IRREGULAR = {"is": "am", "has": "have", "does": "do", "goes": "go"}


def in_first_person(phrase: str) -> str:
    """'lives in' -> 'live in', 'is based in' -> 'am based in', 'studies' -> 'study'."""
    word, space, rest = phrase.partition(" ")
    if word in IRREGULAR:
        word = IRREGULAR[word]
    elif word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith(("ches", "shes", "sses", "xes")):
        word = word[:-2]
    elif word.endswith("s"):
        word = word[:-1]
    return word + space + rest


def article(noun: str) -> str:
    return f"an {noun}" if noun[0].lower() in "aeiou" else f"a {noun}"


def sentence(text: str) -> str:
    return text[0].upper() + text[1:]


def fill(template: str, subject: Subject, **values: str) -> str:
    """A template of CHANGES written for ``subject``."""
    text = re.sub(r"\{v:([^}]+)\}", lambda m: subject.verb(m.group(1)), template)
    text = text.replace("{S's}", subject.possessive).replace("{S}", subject.text)
    return sentence(text.replace("{their}", subject.their).format(**values))


@dataclass(frozen=True)
class Statement:
    """One way of stating a fact: the parts a variation changes."""

    subject: Subject
    verb: str  # third person: "lives in", "goes skiing"
    obj: str = ""
    adverbial: str = ""
    adverbial_first: bool = False
    prefix: str = ""
    hedge: str = ""
    style: str = ""

    def text(self) -> str:
        verb = self.subject.verb(self.verb)
        if self.hedge:
            first, _, rest = verb.partition(" ")
            if first in ("is", "am"):
                verb = f"{first} {self.hedge} {rest}"
            else:
                verb = f"{self.hedge} {verb}"
        core = " ".join(p for p in (self.subject.text, verb, self.obj) if p)
        if self.adverbial and self.adverbial_first:
            core = f"{self.adverbial} {core}"
        elif self.adverbial:
            core = f"{core} {self.adverbial}"
        # "User mentioned that in winter Carol ...": a clause after "that" starts lowercase
        head = core if self.prefix.endswith("that ") else sentence(core)
        text = self.prefix + head + "."
        if self.style in ("lower", "lower_no_period"):
            text = text.lower()
        if self.style in ("no_period", "lower_no_period"):
            text = text[:-1]
        if self.style == "exclamation":
            text = text[:-1] + "!"
        return text
