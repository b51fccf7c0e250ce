"""A synthetic long-turn conversation as hard as LongMemEval-S's haystacks, seeded, with no
downloaded data ("Retrieval that carries over", issue 42 item 6; issue 34's easier corpus is
long_turns.py).

What makes the real data hard, kept at a size the suite can embed:

- **Long assistant turns.** Their lengths are drawn (seeded) from the empirical distribution
  of LongMemEval-S's assistant turns (``ASSISTANT_CHARS``: every 5th percentile of the 7,468
  non-empty assistant turns of the 30 files in shared/data/longmemeval, interpolated; median
  1,715 characters, one in five longer than 2,870, the longest 4,712), in the shape of a
  helpful answer (an opener, numbered tips, a closing line) made of everyday words and of the
  words of the session's topic.
- **Sessions about one topic each**, opened by a request; the answers keep to it, so the turns
  around a fact talk about the same things as the question does.
- **The fact in a short user turn after a long assistant turn**, in passing, inside a request
  on the session's topic, as LongMemEval's evidence is ("... By the way, I bought a smoker last
  week, so I'd like to try ribs ... What wood goes well with pork?"; 230-260 characters, where
  LongMemEval's user evidence turns have 110-460, median 280), worded differently from the
  question ("bought" for "buy"); the answer before it is one of the longer half. The answer
  to it mentions the thing again ("ribs in a new smoker"), and so does a later user turn of
  the session that does not hold the fact ("How long should ribs stay in the smoker?"), as the
  turns around LongMemEval's evidence do.
- **Distractors**: for each question a user turn in another session that shares its common
  words and one of its content words in another sense ("My uncle was a heavy smoker for many
  years ... a few days ago"), and the answer to it, which does the same; every answer is full
  of the questions' common words ("many", "days", "ago", "week", "name"). Neither a rare word
  nor the question's wording singles the evidence out.
- **Questions phrased like LongMemEval's**: "How many days ago did I buy a smoker?", "What did
  I say about the telescope I ordered?".

The size is fixed: QUESTIONS sessions, one per fact, each of its opening request, the fact
and the follow-up, and one other fact's distractor; every user turn answered (TURNS turns).
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

TOPICAL = 0.5  # the share of an answer's nouns taken from its session's topic

# LongMemEval-S assistant turns, characters: the 0th, 5th, ..., 100th percentile.
ASSISTANT_CHARS = (
    1, 335, 560, 732, 876, 1013, 1146, 1273, 1401, 1556, 1715,
    1859, 2016, 2143, 2278, 2407, 2544, 2686, 2873, 3132, 4712,
)  # fmt: skip


@dataclass(frozen=True)
class Topic:
    """What a session is about: the request that opens it and the words its answers use."""

    request: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class Fact:
    """One thing the user said in passing, the question that asks for it, and what else in
    the conversation shares the question's words."""

    topic: Topic  # of the session it is said in
    evidence: str  # the user's turn that holds it
    echo: str  # what the answer to it says about the thing
    follow_up: str  # a later user turn of the session about the thing, not the fact
    question: str
    distractor: str  # a user turn: the question's common words, a content word in another sense
    aside: str  # the answer to the distractor says it too


def topic(request: str, words: str) -> Topic:
    """A topic whose words are written as one string."""
    return Topic(request, tuple(words.split()))


FACTS = (
    Fact(
        topic(
            "I'm hosting a cookout for the neighbours next Saturday, about twelve people and a "
            "few kids. What should I make so that I'm not stuck at the grill all afternoon?",
            "grill ribs pork brisket charcoal wood sauce rub meat fire smoke smoker "
            "thermometer chicken burger cookout",
        ),
        "Thanks, that's a helpful list. I want to keep it simple for the neighbours, nothing "
        "too fancy. By the way, I bought a smoker last week, so I'd like to try ribs this time "
        "instead of burgers. What wood goes well with pork, and should I soak the chips first?",
        "Hickory and apple wood are both good choices for ribs in a new smoker.",
        "One more thing: how long should ribs stay in the smoker, and how hot should it be? I "
        "don't want them to dry out.",
        "How many days ago did I buy a smoker?",
        "My uncle was a heavy smoker for many years and he finally quit a few days ago. How "
        "can I help him stay away from cigarettes?",
        "A smoker who quits may feel restless for many days, and that is normal.",
    ),
    Fact(
        topic(
            "My bread keeps coming out dense and flat, even when I follow the recipe exactly. "
            "What am I doing wrong, and what should I check first?",
            "bread flour dough oven starter yeast loaf crust salt sourdough kitchen "
            "recipe jar bowl",
        ),
        "That makes sense, I think my kitchen is too cold. I've been feeding my sourdough "
        "starter twice a day for three weeks now, and I named it Bubbles because it gets so "
        "foamy. Should I switch flour, or just give it more time to get stronger?",
        "A sourdough starter that is three weeks old may still need a warmer spot to rise.",
        "Is it okay to keep my sourdough starter in the fridge when I travel for a week? I "
        "don't want to lose it.",
        "What is the name of my sourdough starter?",
        "What is a good starter for a dinner party? My name is on the list for the potluck "
        "and I don't want to bring bread again.",
        "A light soup is a good starter, and it leaves room for the main course.",
    ),
    Fact(
        topic(
            "I want to spend more evenings outside this autumn instead of watching TV. Do you "
            "have any ideas for a beginner who lives in a city?",
            "sky star planet moon telescope lens night balcony binoculars map cloud "
            "astronomy evening chair",
        ),
        "I like this idea a lot, evenings have been clear lately. I've ordered a refractor "
        "telescope so I can watch Saturn from my balcony, and it should arrive soon. Do I need "
        "anything else as a beginner, like a star map or a special chair?",
        "With a small telescope, Saturn's rings are easy to see on a clear night.",
        "Can a small telescope show the moons of Jupiter too, or only Saturn? I'd love to show "
        "my nephew.",
        "What did I say about the telescope I ordered?",
        "I said I would finally put my books in order, so I ordered them by colour on the "
        "shelf, but it looks messy. Any tips?",
        "Put the books in order by size first, and say no to anything extra on the shelf.",
    ),
    Fact(
        topic(
            "I have a lot of free time on Sundays now that the kids are older. What hobby could "
            "I pick up at home that's relaxing and not too expensive?",
            "yarn wool scarf loom pattern needle thread colour blanket knot weaving craft "
            "project hobby",
        ),
        "Weaving sounds fun, and I'd like something calm to do on Sunday afternoons. My "
        "grandma passed her old weaving loom on to me when she moved, so a scarf will be my "
        "first project. Which yarn is easiest for beginners, and how much will I need?",
        "A scarf is a great first project on a loom, and a thick wool yarn is forgiving.",
        "How do I keep the edges straight when I weave on a loom? Mine always pull inward.",
        "Who gave me a loom, and what did I want to make first?",
        "Deadlines loom over my team every spring, and my manager gave me two more projects "
        "this week. How do I say no politely? I want to make a good first impression.",
        "When big deadlines loom, give yourself a short break every hour.",
    ),
    Fact(
        topic(
            "Which flowers should we plant along the fence this spring? The spot gets sun in "
            "the morning and shade after lunch.",
            "flower seed soil bee beehive plant fence lavender clover compost garden hive "
            "honey bed",
        ),
        "Great list, thank you. We set up a beehive at the back of the community garden last "
        "weekend, and the neighbours are already curious about it. So something the bees like "
        "would be best, ideally flowers that bloom at different times of the year.",
        "Lavender and clover near the beehive will keep the bees busy all summer.",
        "Do the bees in a beehive need water nearby in the summer, or do they find it themselves?",
        "Where did we put the beehive?",
        "For the costume party we put my sister's hair up in a beehive, like in the sixties. "
        "Where can I find a matching dress?",
        "A beehive or a bob needs a little hairspray to stay put all night.",
    ),
    Fact(
        topic(
            "Can you help me plan my grocery list for the week? I want to spend less without "
            "eating the same three meals every day.",
            "grocery list coupon app cashback rebate receipt store budget price deal "
            "shopping pantry milk",
        ),
        "Good tips, I'll begin with the pantry. I just downloaded Ibotta, a cashback app that "
        "gives rebates on certain groceries, so I want to get the most out of it. Should I plan "
        "my list around its offers, or is that a trap that makes me spend more?",
        "Check the cashback app before you shop, since the rebates change every week.",
        "Does a cashback app work with store coupons at the same time, or do I have to pick one?",
        "How many weeks ago did I start using the cashback app?",
        "Many weeks ago I started using a running app, and now I want to start training for "
        "a 10k. How should I build up?",
        "A running app can start you with short runs and add a little every week.",
    ),
    Fact(
        topic(
            "My nose has been blocked for months and I sleep badly because of it. What could "
            "help, apart from the usual tissues and tea?",
            "doctor spray nose sinus allergy appointment medicine symptom pillow "
            "humidifier air dust sleep",
        ),
        "I finally went to see someone about it last month. I got diagnosed with chronic "
        "sinusitis by Dr. Patel, and she prescribed a nasal spray that I'm supposed to use "
        "every morning. How do I use it properly, and how long before it helps?",
        "Use the nasal spray as prescribed: tilt your head forward a little and breathe in gently.",
        "How many times a day is it safe to use a nasal spray? I don't want to overdo it.",
        "Which doctor prescribed my nasal spray?",
        "The doctor at my daughter's school said some kids were spraying paint on the walls. "
        "Which spray cleans paint off brick?",
        "A spray of warm soapy water and a stiff brush take most paint off brick.",
    ),
    Fact(
        topic(
            "I'm setting up a small aquarium in the living room, my first one. What do I need "
            "to buy, and what should I do before adding any fish?",
            "fish tank aquarium filter food gravel plant tetra heater light pump water glass pet",
        ),
        "Thanks, the filter is running nicely now. I added five neon tetras to my aquarium "
        "yesterday, so I have twelve fish altogether. What should I feed them, and at what "
        "times of day, so they stay healthy without clouding the water?",
        "Small flakes once or twice a day are enough for the fish in a home aquarium.",
        "How often should I change the water in my aquarium, and how much of it at a time?",
        "How many fish are in my aquarium?",
        "How many fish should I buy for a dinner of eight people? My family loves grilled "
        "fish in the summer.",
        "Fish like salmon grill well, and one fillet is enough for each person at dinner.",
    ),
)

QUESTIONS = len(FACTS)  # 8
TURNS = 2 * 4 * QUESTIONS  # 64: four user turns a fact (see above), each answered

# What long, helpful answers are made of beside their topic: everyday words, the questions'
# common ones among them.
NOUNS = (
    "time day week home family friend money place work food water room kitchen garden car "
    "phone book music plan idea habit routine budget list meal recipe trip weekend evening "
    "morning job team project health sleep walk class school store price gift party schedule "
    "goal hobby skill tool space neighbour partner child parent name question answer result "
    "change reason experience break coffee dinner lunch bag shelf"
).split()
VERBS = (
    "make keep find try start plan choose buy check set use give take bring share write "
    "track clean cook visit ask learn practise build save spend enjoy consider put say order"
).split()
ADJECTIVES = (
    "good simple small new local regular healthy quiet little easy comfortable different "
    "important useful fresh reliable affordable friendly short long great"
).split()
TIMES = (
    "every day",
    "once a week",
    "a few days ago",
    "over the weekend",
    "in the morning",
    "after many years",
    "last week",
    "next month",
    "for a few minutes",
    "a day or two before",
    "many weeks in advance",
    "at the end of the day",
)
SENTENCES = (
    "{Verb} a {adj} {noun} for your {noun}.",
    "It is a good idea to {verb} your {noun} {time}.",
    "Many people {verb} a {noun} {time}, and it can really help with your {noun}.",
    "If you {verb} a {adj} {noun}, you will find it easier to {verb} your {noun}.",
    "Try to {verb} the {noun} {time} so that your {noun} stays {adj}.",
    "Don't forget to {verb} a {noun} before you {verb} the {noun}.",
    "A {adj} {noun} can make a big difference to how you {verb} your {noun}.",
    "You can also ask a friend which {noun} to {verb} first.",
    "Where you {verb} your {noun} matters as much as how many times you {verb} it.",
    "Who you {verb} with is part of the {noun}, so {verb} a {adj} {noun} {time}.",
)
OPENERS = (
    "That's a great question! Here are some ideas that could help:",
    "I'd be happy to help you with that. Here are a few suggestions:",
    "Great choice! Many people find these tips useful:",
    "It really depends on how much time you have, but here are some things to consider:",
)
CLOSERS = (
    "I hope these tips help. Let me know if you have any other questions!",
    "Remember, small changes add up over time. Good luck!",
    "Feel free to ask if you want more ideas on any of these.",
)


@dataclass(frozen=True)
class Question:
    text: str
    evidence: int  # index of the evidence turn in ``Conversation.turns``


@dataclass(frozen=True)
class Conversation:
    turns: list[tuple[str, str, str]]  # (session id, speaker, content)
    questions: list[Question]


def assistant_lengths(rng: random.Random, count: int) -> list[int]:
    """``count`` lengths drawn from LongMemEval-S's assistant turns, shortest first: the
    interpolated quantile of one uniform draw from each of ``count`` equal strata of (0, 1),
    so that even a small sample has the real distribution's shape."""
    lengths = []
    for stratum in range(count):
        position = (stratum + rng.random()) / count * (len(ASSISTANT_CHARS) - 1)
        low = min(int(position), len(ASSISTANT_CHARS) - 2)
        share = position - low
        lengths.append(
            round(ASSISTANT_CHARS[low] + share * (ASSISTANT_CHARS[low + 1] - ASSISTANT_CHARS[low]))
        )
    return lengths


def sentence(rng: random.Random, topic: Topic) -> str:
    """One sentence of everyday advice, about ``topic`` in part."""
    slots = {
        "noun": lambda: rng.choice(topic.words if rng.random() < TOPICAL else NOUNS),
        "verb": lambda: rng.choice(VERBS),
        "Verb": lambda: rng.choice(VERBS).capitalize(),
        "adj": lambda: rng.choice(ADJECTIVES),
        "time": lambda: rng.choice(TIMES),
    }
    text = re.sub(r"\{(\w+)\}", lambda slot: slots[slot[1]](), rng.choice(SENTENCES))
    return re.sub(r"\b([Aa]) ([aeiou])", r"\1n \2", text)


def answer(rng: random.Random, topic: Topic, length: int, said: list[str]) -> str:
    """An assistant turn of about ``length`` characters (longer only to say all of ``said``):
    an opener, numbered tips with ``said`` first, a closing line; cut to ``length`` when that
    is shorter than an opener and a closing line."""
    text = rng.choice(OPENERS)
    closer = "\n\n" + rng.choice(CLOSERS)
    tip = left_in_tip = 0
    for number in itertools.count():
        line = said[number] if number < len(said) else sentence(rng, topic)
        # stop before the sentence that would take the turn further from its length
        if number >= len(said) and len(text) + len(line) / 2 + len(closer) > length:
            break
        if not left_in_tip:
            tip += 1
            left_in_tip = rng.randint(1, 3)
            title = f"{rng.choice(ADJECTIVES).capitalize()} {rng.choice(topic.words)}"
            text += f"\n\n{tip}. **{title}:**"
        text += " " + line
        left_in_tip -= 1
    return text + closer if tip else (text + closer)[:length]


def conversation(seed: int) -> Conversation:
    """The conversation of the module's constants, the same for the same seed: one session
    per fact, in a seeded order: its topic's request, the fact, its follow-up, and another
    fact's distractor at a seeded place after the request. The answers' lengths are drawn
    from LongMemEval-S's; the answer before a fact is one of the longer half of them, as
    LongMemEval's are (median ~2,300 characters before a user's evidence turn)."""
    rng = random.Random(seed)
    facts = rng.sample(FACTS, len(FACTS))
    sessions: list[list[tuple[str, str | None]]] = [
        [(f.topic.request, None), (f.evidence, f.echo), (f.follow_up, None)] for f in facts
    ]
    # each distractor in another fact's session (a derangement), anywhere after its opening
    hosts = list(range(len(facts)))
    while any(host == own for own, host in enumerate(hosts)):
        rng.shuffle(hosts)
    for fact, host in zip(facts, hosts, strict=True):
        sessions[host].insert(rng.randint(1, len(sessions[host])), (fact.distractor, fact.aside))
    lengths = assistant_lengths(rng, sum(len(said) for said in sessions))
    before_facts = rng.sample(range(len(lengths) // 2, len(lengths)), len(facts))
    before_facts_lengths = [lengths[i] for i in before_facts]
    others = [n for i, n in enumerate(lengths) if i not in before_facts]
    rng.shuffle(others)
    turns: list[tuple[str, str, str]] = []
    questions = []
    for number, (fact, said) in enumerate(zip(facts, sessions, strict=True)):
        session = f"session-{number + 1}"
        for (content, reply), (following, _) in zip(said, [*said[1:], ("", None)], strict=True):
            turns.append((session, "user", content))
            if content == fact.evidence:
                questions.append(Question(fact.question, len(turns) - 1))
            length = (before_facts_lengths if following == fact.evidence else others).pop()
            text = answer(rng, fact.topic, length, [reply] if reply else [])
            turns.append((session, "assistant", text))
    return Conversation(turns, questions)
