"""What a short insight states, read without a model: subject, attribute and value.

"Carol lives in Berlin." and "Carol moved to Munich." both state Carol's residence; "Carol
enjoys hiking." and "Carol really likes hiking." both state that Carol likes hiking. A fact
is read only from a text that is one plain statement matching one of the frames below, from
start to end; anything else (several sentences, a question, a clause the frames do not know)
states no fact here and is compared by its words alone (wording.py).

A frame's attribute is *functional* when a subject has one value of it at a time (where one
lives, works, one's favourite colour): a newer value updates the older. Other attributes
(likes, speaks, has, visited) hold many values at once and are never updated, only merged
when the value is the same. Subjects are kept apart exactly: "Carol's sister" and "Carol's
brother" are two subjects, "Carol" a third.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gql_memory.memory.consolidation.wording import SOFT_WORDS, strip_preamble, without_hedges


@dataclass(frozen=True)
class Fact:
    """One statement: ``subject`` and ``value`` normalised (lower case, no articles)."""

    subject: str
    attribute: str
    value: str
    functional: bool
    # False: read past a clause before the verb ("Ines had a birthday and is 37"): enough to
    # update a fact, never to merge one (the clause would be lost with the merged text)
    whole: bool = field(default=True, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.subject, self.attribute)


# A subject: the user (in any person), a name of one or two capitalised words, either of them
# with one possessive step ("Carol's sister", "my brother", "the user's boss").
_NAME = r"[A-Z][\w-]*(?:\s[A-Z][\w-]*)?"
_OWNER = rf"(?:[Tt]he\s[Uu]ser|[Uu]ser|{_NAME})"
SUBJECT = rf"(?P<subject>(?:{_OWNER}['’]s\s[a-z]+(?:\s[a-z]+)?)|(?:[Mm]y\s[a-z]+)|{_OWNER}|I)"
_NOW = r"(?:(?:now|currently|recently|just)\s)?"
_A = r"(?:(?:a|an)\s)?"
# The value: the rest of the statement, up to its end.
_VALUE = r"(?P<value>[^.!?;]+?)"
_END = r"\s*(?:now|again|these days|nowadays)?\s*[.!]*\s*$"


@dataclass(frozen=True)
class _Frame:
    attribute: str
    functional: bool
    pattern: re.Pattern[str]


def _frame(attribute: str, functional: bool, *verbs: str) -> list[_Frame]:
    return [
        _Frame(
            attribute,
            functional,
            re.compile(
                rf"^{SUBJECT}\s(?P<clause>(?:[\w'’-]+\s){{1,6}}and\s)?(?:{_NOW}){verb}"
                rf"(?:(?<=\s)|\s){_VALUE}{_END}"
            ),
        )
        for verb in verbs
    ]


def _possessive(attribute: str, functional: bool, *nouns: str) -> list[_Frame]:
    """ "<owner>'s <noun> is <value>": the noun names the attribute."""
    return [
        _Frame(
            attribute,
            functional,
            re.compile(
                rf"^(?P<subject>{_OWNER}|[Mm]y)(?:['’]s)?\s(?:new\s)?{noun}\s"
                rf"(?:is|was changed to|changed to|has changed to|has become|became){_NOW_AFTER}\s"
                rf"(?:named\s|called\s)?{_VALUE}{_END}"
            ),
        )
        for noun in nouns
    ]


_NOW_AFTER = r"(?:\s(?:now|currently))?"

# The nouns that name a functional attribute when a subject's is stated or changed:
# "<owner>'s <noun> is <value>", "<subject> changed their <noun> to <value>".
POSSESSED: dict[str, str] = {
    r"(?:home|hometown|home town|city)": "residence",
    r"(?:employer|company)": "employer",
    r"(?:job|job title|occupation|profession|role|position)": "occupation",
    r"(?:girlfriend|boyfriend|wife|husband|partner|fianc[ée]e?)": "partner",
    r"(?:phone number|phone|mobile number|mobile|number)": "phone",
    r"(?:email address|email|e-mail address|e-mail)": "email",
    r"(?:address|home address)": "address",
    r"birthday": "birthday",
    r"age": "age",
    r"car": "car",
    r"diet": "diet",
    r"(?:relationship status|status)": "relationship",
    r"(?:major|field of study|subject)": "studies",
}
_PETS = r"(?P<pet>dog|cat|puppy|kitten|pet|parrot|rabbit|hamster|horse)"
_THEIR = r"(?:their|his|her|my)"


def _changed(attribute: str, noun: str) -> _Frame:
    """ "<subject> changed their <noun> (from <old>) to <value>"."""
    return _Frame(
        attribute,
        True,
        re.compile(
            rf"^{SUBJECT}\s(?:has\s)?(?:changed|updated|switched)\s{_THEIR}\s{noun}\s"
            rf"(?:from\s[^.!?;]+?\s)?to\s{_VALUE}{_END}"
        ),
    )


FRAMES: list[_Frame] = [
    # possessives first: "Carol's favourite colour is a deep blue" is a favourite, not an "is"
    *(f for noun, attribute in POSSESSED.items() for f in _possessive(attribute, True, noun)),
    *(_changed(attribute, noun) for noun, attribute in POSSESSED.items()),
    # the favourite X: X is part of the attribute
    _Frame(
        "favourite",
        True,
        re.compile(
            rf"^(?P<subject>{_OWNER}|[Mm]y)(?:['’]s)?\s(?:new\s)?favou?rite\s"
            rf"(?P<thing>[a-z]+(?:\s[a-z]+)?)\s(?:is|has become|became|changed to|"
            rf"has changed to){_NOW_AFTER}\s{_VALUE}{_END}"
        ),
    ),
    # a pet's name: "Sam's dog is called Coco", "Rosa has a dog named Luna", "renamed their dog"
    _Frame(
        "name",
        True,
        re.compile(
            rf"^(?P<subject>{_OWNER}|[Mm]y)(?:['’]s)?\s{_PETS}(?:['’]s name)?\s"
            rf"(?:is|was)\s(?:now\s)?(?:named\s|called\s)?{_VALUE}{_END}"
        ),
    ),
    _Frame(
        "name",
        True,
        re.compile(
            rf"^{SUBJECT}\s(?:has|owns|got|adopted)\s(?:a|an)\s(?:new\s)?{_PETS}\s"
            rf"(?:named|called)\s{_VALUE}{_END}"
        ),
    ),
    _Frame(
        "name",
        True,
        re.compile(rf"^{SUBJECT}\s(?:has\s)?renamed\s{_THEIR}\s{_PETS}\s(?:to\s)?{_VALUE}{_END}"),
    ),
    *_frame(
        "residence",
        True,
        r"(?:lives?|resides?|is living|has been living|is based|is settled)\sin",
        r"(?:has\s)?(?:moved|relocated)\s(?:back\s)?to",
        r"(?:has\s)?(?:moved|relocated)\s(?:from\s[^.!?;]+?\s)?to",
    ),
    *_frame(
        "employer",
        True,
        r"(?:works?|is working|has been working)\s(?:at|for)",
        r"is employed\s(?:at|by)",
        r"has a (?:new\s)?job\sat",
        r"(?:joined|has joined|started working at|started at|got a job at|took a job at)",
        r"(?:started|got|took|accepted|landed)\sa\snew\sjob\s(?:at|with)",
        r"left\s[^.!?;]+?\s(?:and|to)\s(?:joined|join|started at|start at|work at)",
    ),
    *_frame(
        "diet",
        True,
        r"(?:is|has become|became|went|has gone|turned)\s(?:now\s)?(?:a\s)?(?=(?:vegetarian|vegan|"
        r"pescatarian|flexitarian|keto|gluten-free|carnivore|omnivore)\b)",
        r"(?:follows|is on|eats)\s(?:a\s)?(?=[\w-]+\sdiet\b)",
        r"(?:switched|changed|moved|went)\sfrom\s[^.!?;]+?\sto\s(?:a\s|an\s)?(?=(?:vegetarian|"
        r"vegan|pescatarian|flexitarian|keto|gluten-free|carnivore|omnivore)\b)",
    ),
    *_frame(
        "occupation",
        True,
        r"works as\s(?:a|an)",
        r"(?:became|has become|was promoted to|got promoted to|has been promoted to)"
        r"\s(?:a\s|an\s)?",
    ),
    *_frame(
        "relationship",
        True,
        r"(?:is|got)\s(?:now\s)?(?=(?:single|married|engaged|divorced|widowed|separated|"
        r"dating)\b)",
        r"is\s(?:now\s)?(?=in a relationship\b)",
    ),
    *_frame("age", True, r"(?:is|turned|has turned)\s(?:now\s)?(?=\d+\b)"),
    *_frame(
        "car",
        True,
        r"(?:drives|bought|got)\s(?:a\s|an\s)?(?:new\s)?(?=[A-Z])",
        r"traded\s(?:in\s)?[^.!?;]+?\sfor\s(?:a\s|an\s)?(?:new\s)?",
    ),
    *_frame("phone", True, r"can be (?:reached|called|contacted) (?:at|on)"),
    *_frame(
        "studies",
        True,
        r"(?:studies|study|is studying|has been studying|switched to studying|majors in|"
        r"is majoring in|is doing a degree in)",
    ),
    # many values at once: merged when the same, never updated
    *_frame(
        "likes",
        False,
        r"(?:really\s)?(?:likes?|enjoys?|loves?|adores?|is into|is fond of|is a fan of|"
        r"is passionate about|is keen on)",
    ),
    *_frame(
        "dislikes",
        False,
        r"(?:dislikes?|hates?|doesn't like|does not like|can't stand|cannot stand|detests?)",
    ),
    *_frame("speaks", False, r"(?:speaks?|is fluent in|can speak)"),
    *_frame(
        "allergic to",
        False,
        r"(?:is allergic to|am allergic to|has an allergy to|has allergies to|"
        r"suffers from an allergy to)",
    ),
    *_frame("has", False, r"(?:has|owns|have|own)"),
    *_frame("visited", False, r"(?:visited|has visited|went to|travelled to|traveled to)"),
    *_frame("is", False, r"is\s(?:a|an)"),
]

# Said before a statement: when, and who reported it ("These days Felix's...", "Iris says
# their favourite colour is..."), taken off before a fact is read.
_WHEN = re.compile(
    r"^(?:these days|nowadays|currently|lately|recently|at the moment|now|as of now),?\s+",
    re.IGNORECASE,
)
_REPORTED = re.compile(
    rf"^(?P<subject>{_OWNER}|I)\s(?:says?|said|mentioned|told me)\s(?:that\s)?"
    rf"(?P<owner>their|his|her|my)\s"
)
# The first person as the frames read it: "I am engaged" as "I is engaged".
_FIRST_PERSON = re.compile(r"^I(\s(?:am|have|do)\b|['’](?:m|ve)\b)")
_THIRD = {" am": "is", " have": "has", " do": "does", "m": "is", "ve": "has"}
# British and American spelling are one attribute
_SPELLING = {"favorite": "favourite", "color": "colour", "colors": "colours"}

_USER_WORDS = {"the user": "user", "user": "user", "i": "user", "my": "user", "me": "user"}
_ARTICLES = {"a", "an", "the"}
_VALUE_FILLER = {"to", "go", "going"}


def read_fact(text: str) -> Fact | None:
    """The fact a text states, or None when it is not one plain statement of a frame."""
    statement = _spoken_plainly(without_hedges(strip_preamble(text.strip())))
    if not statement or len(statement) > 300 or statement.count(".") > 1 or "?" in statement:
        return None
    for frame in FRAMES:
        match = frame.pattern.match(statement)
        if match is None:
            continue
        value = _normal_value(match.group("value"))
        if not value:
            continue
        groups = match.groupdict()
        attribute = frame.attribute
        if groups.get("thing"):
            attribute = f"favourite {_respelled(groups['thing'].lower())}"
        if groups.get("pet"):
            attribute = f"{groups['pet'].lower()}'s name"
        if attribute == "diet":
            value = value.removesuffix(" diet")
        if attribute == "age":
            value = value.split()[0]
        return Fact(
            _normal_subject(match.group("subject")),
            attribute,
            _respelled(value),
            frame.functional,
            whole=not groups.get("clause"),
        )
    return None


def _spoken_plainly(statement: str) -> str:
    """The statement without when or who said it: "These days Felix's favourite food is
    ramen" -> "Felix's favourite food is ramen"; "Iris says their favourite colour is green"
    -> "Iris's favourite colour is green"; in the third person ("I am" -> "I is", as the
    frames read it)."""
    statement = _WHEN.sub("", statement)
    statement = _FIRST_PERSON.sub(lambda m: "I " + _THIRD[m.group(1).lstrip("'’")], statement)
    statement = statement[:1].upper() + statement[1:]
    reported = _REPORTED.match(statement)
    if reported is not None:
        subject = reported.group("subject")
        owner = "My" if subject == "I" or reported.group("owner") == "my" else f"{subject}'s"
        statement = f"{owner} {statement[reported.end() :]}"
    return statement


def _respelled(words: str) -> str:
    return " ".join(_SPELLING.get(w, w) for w in words.split())


def _normal_subject(subject: str) -> str:
    words = subject.replace("’", "'").split()
    lowered = " ".join(words).lower()
    if lowered in _USER_WORDS:
        return "user"
    if lowered.startswith("my "):
        return "user's " + lowered[3:]
    if lowered.startswith(("the user's ", "user's ")):
        return "user's " + lowered.split("'s ", 1)[1]
    return lowered


def _normal_value(value: str) -> str:
    words = [w.strip(",'\"’") for w in value.replace("’", "'").lower().split()]
    words = [w for w in words if w and w not in SOFT_WORDS]
    while words and words[0] in _ARTICLES | _VALUE_FILLER:
        words = words[1:]
    return " ".join(w for w in words if w not in _ARTICLES)
