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
from dataclasses import dataclass

from gql_memory.memory.consolidation.wording import SOFT_WORDS, strip_preamble


@dataclass(frozen=True)
class Fact:
    """One statement: ``subject`` and ``value`` normalised (lower case, no articles)."""

    subject: str
    attribute: str
    value: str
    functional: bool

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
            re.compile(rf"^{SUBJECT}\s(?:{_NOW}){verb}(?:(?<=\s)|\s){_VALUE}{_END}"),
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
                rf"(?:is|was changed to|changed to|has changed to){_NOW_AFTER}\s"
                rf"(?:named\s|called\s)?{_VALUE}{_END}"
            ),
        )
        for noun in nouns
    ]


_NOW_AFTER = r"(?:\s(?:now|currently))?"

FRAMES: list[_Frame] = [
    # possessives first: "Carol's favourite colour is a deep blue" is a favourite, not an "is"
    *_possessive("residence", True, r"(?:home|hometown|home town|city)"),
    *_possessive("employer", True, r"(?:employer|company)"),
    *_possessive("occupation", True, r"(?:job|job title|occupation|profession|role)"),
    *_possessive("partner", True, r"(?:girlfriend|boyfriend|wife|husband|partner|fianc[ée]e?)"),
    *_possessive("phone", True, r"(?:phone number|phone|mobile number|number)"),
    *_possessive("email", True, r"(?:email address|email|e-mail address|e-mail)"),
    *_possessive("address", True, r"(?:address|home address)"),
    *_possessive("birthday", True, r"birthday"),
    *_possessive("age", True, r"age"),
    *_possessive("car", True, r"car"),
    *_possessive("diet", True, r"diet"),
    *_possessive("status", True, r"(?:relationship status|status)"),
    *_possessive("pet name", True, r"(?:dog|cat|pet|puppy|kitten)(?:['’]s name)?"),
    # the favourite X: X is part of the attribute
    _Frame(
        "favourite",
        True,
        re.compile(
            rf"^(?P<subject>{_OWNER}|[Mm]y)(?:['’]s)?\s(?:new\s)?favou?rite\s"
            rf"(?P<thing>[a-z]+(?:\s[a-z]+)?)\s(?:is|has become|became){_NOW_AFTER}\s"
            rf"{_VALUE}{_END}"
        ),
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
        r"has a job\sat",
        r"(?:joined|has joined|started working at|started at|got a job at|took a job at)",
        r"left\s[^.!?;]+?\s(?:and|to)\s(?:joined|join|started at|start at|work at)",
    ),
    *_frame(
        "occupation",
        True,
        r"works as\s(?:a|an)",
        r"(?:became|has become|was promoted to|got promoted to)\s(?:a\s|an\s)?",
    ),
    *_frame(
        "diet",
        True,
        r"(?:is|has become|became|went)\s(?:a\s)?(?=(?:vegetarian|vegan|pescatarian|"
        r"flexitarian|keto|gluten-free|carnivore|omnivore)\b)",
        r"(?:follows|is on|eats)\s(?:a\s)?(?=[\w-]+\sdiet\b)",
    ),
    *_frame(
        "relationship",
        True,
        r"(?:is|got)\s(?=(?:single|married|engaged|divorced|widowed|separated|dating)\b)",
        r"is\s(?=in a relationship\b)",
    ),
    *_frame("age", True, r"(?:is|turned)\s(?=\d+\b)"),
    *_frame("car", True, r"(?:drives|bought|got)\s(?:a\s|an\s)?(?:new\s)?(?=[A-Z])"),
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
    *_frame("has", False, r"(?:has|owns|have|own)"),
    *_frame("visited", False, r"(?:visited|has visited|went to|travelled to|traveled to)"),
    *_frame("is", False, r"is\s(?:a|an)"),
]

_USER_WORDS = {"the user": "user", "user": "user", "i": "user", "my": "user", "me": "user"}
_ARTICLES = {"a", "an", "the"}
_VALUE_FILLER = {"to", "go", "going"}


def read_fact(text: str) -> Fact | None:
    """The fact a text states, or None when it is not one plain statement of a frame."""
    statement = strip_preamble(text.strip())
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
            attribute = f"favourite {groups['thing'].lower()}"
        return Fact(_normal_subject(match.group("subject")), attribute, value, frame.functional)
    return None


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
