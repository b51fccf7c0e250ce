"""A synthetic long-turn conversation, seeded, with no downloaded data (issue 34): short user
turns that each carry one rare fact, after 1,500–3,000-character assistant turns full of
common words, and questions that share one rare word with their evidence plus common words
that the long answers are full of ("How many days ago did I buy a smoker?")."""

from __future__ import annotations

import random
from dataclasses import dataclass

# What long, helpful answers are made of: a few hundred everyday words, among them every
# common word of the questions, so that each long answer holds most of them.
COMMON = (
    "many days ago buy bought time good great make really things also people way help know "
    "think would could like want need best first new work try different important lot much "
    "well even still year week long little right start keep find give day often friend "
    "family home money place part case point group number problem fact hand world life "
    "child school state story question night area water room mother game book eye job word "
    "business issue side kind head house service power hour line end member law car city "
    "name team minute idea body information back parent face others level office door "
    "health person art war history party result change morning reason research girl guy "
    "moment air teacher force education foot boy age policy process music market sense "
    "nation plan college interest death experience effect use class control care field "
    "development role effort rate heart drug show leader light voice wife police mind price "
    "report decision son view relationship town road arm difference value building action "
    "model season society tax director position player record paper space ground form event "
    "official matter center couple site project activity star table need court oil situation "
    "cost industry figure street image phone data picture practice piece land product doctor "
    "wall patient worker news test movie north love support technology step baby computer "
    "type attention film tree source organization hair window evidence population site"
).split()
OPENERS = (
    "That is a great question, and there are many things to think about here.",
    "Here are a few ideas that could help you make the most of your time.",
    "Many people find that it takes a few days to get used to something new.",
    "It really depends on what you want and how much time you have each week.",
)
CHATTER = (
    "Thanks, that helps a lot.",
    "Good to know, I will think about it.",
    "Interesting, tell me more about that.",
    "Okay, that makes sense to me.",
    "Great, I will try that this week.",
)
# (rare thing, what the user said about it, the question that asks for it)
FACTS = (
    (
        "smoker",
        "I just got a smoker today and I'm excited to experiment with different woods.",
        "How many days ago did I buy a smoker?",
    ),
    (
        "kayak",
        "My brother lent me his old kayak for the lake trip next month.",
        "Who lent me the kayak, and how many days do I have it?",
    ),
    (
        "harmonium",
        "I finally found a second-hand harmonium at the flea market.",
        "Where did I buy the harmonium a few days ago?",
    ),
    (
        "terrarium",
        "Built a small terrarium with moss and two ferns for my desk.",
        "What did I put in the terrarium I made a while ago?",
    ),
    (
        "dulcimer",
        "Started taking dulcimer lessons on Thursdays with Mrs. Okafor.",
        "On which day of the week are my dulcimer lessons?",
    ),
    (
        "sourdough",
        "My sourdough starter is called Bubbles and it's three weeks old.",
        "What is the name of the sourdough starter I made?",
    ),
    (
        "telescope",
        "I ordered a refractor telescope to watch Saturn from the balcony.",
        "What kind of telescope did I buy, and what do I want to see?",
    ),
    (
        "loom",
        "Grandma gave me her weaving loom, so I want to try making a scarf.",
        "Who gave me the loom and what do I want to make first?",
    ),
    (
        "beehive",
        "We set up a beehive at the back of the community garden last weekend.",
        "Where did we put the beehive a few days ago?",
    ),
    (
        "ukulele",
        "Bought a tenor ukulele because my fingers hurt on the guitar.",
        "Why did I buy a ukulele instead of playing guitar?",
    ),
)


@dataclass(frozen=True)
class Question:
    text: str
    evidence: int  # index of the evidence turn in ``Conversation.turns``


@dataclass(frozen=True)
class Conversation:
    turns: list[tuple[str, str]]  # (speaker, content)
    questions: list[Question]


def long_answer(rng: random.Random) -> str:
    """1,500–3,000 characters of helpful, common words."""
    target = rng.randint(1_500, 3_000)
    parts = [rng.choice(OPENERS)]
    while sum(len(p) + 1 for p in parts) < target:
        words = rng.choices(COMMON, k=rng.randint(8, 16))
        parts.append(" ".join(words).capitalize() + ".")
    return " ".join(parts)[:target]


def conversation(seed: int, facts: int = len(FACTS), chatter: int = 0) -> Conversation:
    """Assistant turns of 1,500–3,000 characters, each followed by a short user turn: one per
    fact (and its question), ``chatter`` more that say nothing, in a seeded order."""
    rng = random.Random(seed)
    said: list[tuple[str, str | None]] = [(s, q) for _, s, q in rng.sample(FACTS, facts)]
    said += [(rng.choice(CHATTER), None) for _ in range(chatter)]
    rng.shuffle(said)
    turns: list[tuple[str, str]] = []
    questions = []
    for content, asked in said:
        turns.append(("assistant", long_answer(rng)))
        turns.append(("user", content))
        if asked is not None:
            questions.append(Question(asked, len(turns) - 1))
    turns.append(("assistant", long_answer(rng)))
    return Conversation(turns, questions)
