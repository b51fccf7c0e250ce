"""The graph the memories build by themselves: each raw turn and insight gets a node, the
turns of a session are chained by NEXT edges, insights point to their source turns
(DERIVED_FROM), and the entities they name (speakers and capitalised names, less everyday
words opening a sentence; no model, no download) become nodes linked to what mentions them
(SPOKEN_BY, MENTIONS).

Written in the transaction that stores the memories, in one statement per batch. Automatic
nodes and edges carry ``{"auto": true}`` in their properties; they are ordinary graph rows
(neighbors, path, causal boosts and the search's graph propagation all see them), and they
go when the memory they stand for is erased.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import and_, delete, or_, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db.clauses import any_of
from gql_memory.db.tables import nodes
from gql_memory.memory.erasure import detach

TURN_LABEL = "Turn"
INSIGHT_LABEL = "Insight"
ENTITY_LABEL = "Entity"
NEXT = "NEXT"
MENTIONS = "MENTIONS"
SPOKEN_BY = "SPOKEN_BY"
# Bounds the work per memory: the beginning of a long text is enough to find its names.
ENTITY_SCAN_CHARS = 5_000
MAX_ENTITIES_PER_TEXT = 20
MAX_ENTITY_CHARS = 80
# A run of capitalised words ("Caroline", "New York", "LGBTQ"); linear-time as written.
NAME = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*)*")
# Capitalised words that are no names: sentence openers (pronouns, articles, conjunctions,
# greetings, interjections, fillers, contractions...). A run loses them at either end.
NOT_NAMES = frozenset(
    """
    I I'm I've I'd I'll Im Ive Id Ill Me My Mine Myself We We're We've Our Us You You're
    You've Your Yours He He's His Him She She's Her Hers They They're Their Them It It's Its
    This That That's These Those There There's Here Here's The A An And But Or So Nor Yet If
    When While Where What What's Which Who Who's Whom Whose Why How How's Yes No Not Oh Ah Aw
    Wow Hey Hi Hello Thanks Thank Please Sorry Okay Ok OK Yeah Yep Nope Well Also Just Really
    Sure Great Cool Nice Awesome Amazing Good Bye Goodbye Same Maybe Absolutely Definitely
    Totally Exactly Agreed Right True Haha Lol Congrats Congratulations Glad Love Let Let's
    Do Don't Does Doesn't Did Didn't Is Isn't Are Aren't Was Wasn't Were Be Been Have Has Had
    Can Can't Could Would Should Will Won't Shall May Might Must As At By For From In Into Of
    On To With About After Before Since Until Then Now Today Tonight Tomorrow Yesterday Anyway
    Btw Actually Honestly Luckily Unfortunately Sometimes Recently Last Next Every Some All
    Any Many Most One Two First Nothing Everything Something Anything Sounds Speaking
    Remember Going Gonna Got Get Make Take Keep Check Try Look See Know Think Guess Hope Feel
    Never Always Still Even Such Both Each Other Another More Much Very Too Again Whoa Woah
    Yup Yay Yea Nah Aww Awww Woohoo Woo Ooh Ahh Uh Um Eh Hmm Mm Mmm Ha Hah Oof Ouch Ugh Phew
    Oops Yikes Gosh Geez Jeez Dang Damn Alright Anytime Gotcha Lemme Wanna Gotta Kinda Y'all
    BTW FYI TBH IMO IMHO IDK LOL OMG Omg
    """.split()
)
# Everyday words that open sentences: imperatives, verb forms, adverbs and connectives,
# pronouns and numbers, and the nouns, adjectives and heading words a sentence leads with.
# Alone at a sentence's start they are no names ("Remind me that...", "Noted:", "Nature
# is..."); elsewhere, or leading a longer run ("Best Buy", "Art Nouveau"), a capital still
# makes one a name. Words often names too (Will, May, Grace, Summer, Chase...) are left out.
SENTENCE_OPENERS = frozenset(
    """
    Remind Book Call Send Schedule Buy Note Ask Tell Text Email Message Meet Visit Add Set
    Cancel Find Show Give Bring Pick Grab Order Pay Read Write Watch Listen Wait Stop Start Go
    Come Stay Enjoy Talk Catch Believe Appreciate Cherish Count Follow Hold Put Use Trust Agree
    Imagine Consider Share Help Move Update Change Plan Pack Print Save Confirm Reply Answer
    Contact Invite Reserve Rent Return Review Finish Create Build Learn Practice Cook Clean Open
    Close Turn Run Walk Drive Fly Leave Explain Describe Suggest Recommend Compare List
    Summarize Translate Draft Prepare Organize Remove Delete Forget Mind Hang Chat Need Want
    Wish Bet Like Choose Avoid Focus Ensure Identify Research Select Provide Encourage Apply
    Offer Incorporate Place Serve Click Develop Aim Monitor Explore Combine Reach Opt Engage
    Establish Invest Repeat Divide Begin Include Adjust Track Prioritize Join Define Determine
    Fill Attend Label Inspect Celebrate Wear Cut Increase Decide Discuss Search Capture Reflect
    Seek Maintain Highlight Tap Analyze Consult Observe Allow Continue Gather Record Introduce
    Utilize Assign Communicate Assess Optimize Enter Measure Evaluate Treat Replace Improve
    Implement Arrange Collaborate Preheat Limit Install Reduce Familiarize Collect Categorize
    Allocate Proceed Vary Stick Experiment Mix Store Water
    Feels Looks Seems Reminds Makes Means Takes Gives Brings Turns Noted Booked Excited
    Impressed Blessed Started Missed Finished Done Planned Tired Stressed Worried Thrilled
    Pleased Surprised Amazed Confirmed Added Updated Fixed Saved Sent Scheduled Changed
    Interested Used Based Made Lost Found Felt Heard Seen Met Took Went Came Bought Loved Joined
    Checked Wanted Appreciated Inspired Bored Scared Shared Happened Mixed
    Lately Hopefully Finally Basically Especially Seriously Thankfully Fortunately Usually
    Obviously Clearly Apparently Probably Mostly Mainly Literally Personally Currently
    Eventually Certainly Surely Only Highly Truly Quite Pretty Super Almost Already Instead
    However Besides Plus Together Overall Later Soon Otherwise Meanwhile Anyways Whenever
    Wherever Whatever Though Although Because Unless Ever Enough Somewhat Everywhere Apart Off
    Out Up Down Over Back Once Twice Perhaps Additionally Ultimately Therefore Furthermore
    Moreover Firstly Secondly Thirdly Lastly Regularly Simply Gradually Gently Similarly
    Alternatively Consequently Nevertheless Nonetheless Accordingly Hence Thus Indeed Likewise
    Initially Typically Generally Ideally Importantly Interestingly Surprisingly Naturally
    Essentially Specifically Particularly Often Occasionally Frequently Slowly Carefully Quickly
    Immediately Briefly Cheers Kudos Bravo Bummer
    Everyone Everybody Someone Somebody Anyone Anybody Nobody None Lots Tons Few Several Less
    Half Three Four Five Six Seven Eight Nine Ten
    Life Family Nature Art Music People Things Friends Kids Stuff Time Work Way Happy Best Hard
    Tough Crazy Lucky Cute Proud Busy Interesting Exciting Impressive Perfect Beautiful Fun
    Funny Sad Bad Big Small Little Long Strong Simple Quick Easy Fine Fantastic Wonderful Lovely
    Sweet Brilliant Incredible Step Steps Tip Tips Pros Cons Example Examples Option Options
    Summary Overview Conclusion Introduction
    """.split()
)
# Names that read like gerunds, kept at a sentence's start too ("Thanksgiving was fun.").
NAMES_ENDING_ING = frozenset(
    """
    Thanksgiving Boeing Wyoming Darjeeling Peking Kunming Nanning Xining Kipling Rowling
    Fleming Sterling Stirling Irving Ewing Harding Browning Manning Pershing Redding
    """.split()
)
# "They've", "We'll", "Haven't": a contraction is no name.
CONTRACTION = re.compile(r"(?:n['’]t|['’](?:ve|ll|re|d|m))$", re.IGNORECASE)
# What ends a sentence, and what may stand between that end and the sentence's first word
# (spaces, opening quotes and brackets, bullets, dashes). A period after an initial or a title
# ends none ("J.K. Rowling", "Dr. Strange").
SENTENCE_ENDS = ".!?:;\n"
SENTENCE_LEADERS = " \t\"'“‘([*•·>–—-"
ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Mt|Prof))\.$")
ROLE_SPEAKERS = frozenset({"user", "assistant", "system", "tool", "agent", "human", "ai", "bot"})


def entity_names(content: str, speaker: str | None = None) -> list[str]:
    """Names a text mentions: runs of capitalised words, less common words at either end, and
    not an everyday word alone at a sentence's start; the speaker is left out (linked as such).
    At most MAX_ENTITIES_PER_TEXT, in order."""
    text = content[:ENTITY_SCAN_CHARS]
    found: dict[str, None] = {}
    for match in NAME.finditer(text):
        words = match.group(0).split()
        first = words[0]
        while words and is_common(words[0]):
            words = words[1:]
        while words and is_common(words[-1]):
            words = words[:-1]
        if words == [first] and is_opener(first) and opens_sentence(text, match.start()):
            continue
        name = " ".join(words).strip("'’-")
        if name.endswith(("'s", "’s")):
            name = name[:-2]  # "Caroline's" names Caroline
        if len(name) < 2 or len(name) > MAX_ENTITY_CHARS or name in NOT_NAMES:
            continue
        if name == speaker:
            continue
        found.setdefault(name, None)
        if len(found) >= MAX_ENTITIES_PER_TEXT:
            break
    return list(found)


def opens_sentence(text: str, start: int) -> bool:
    """Whether the word at start opens a sentence: it opens the text, or follows . ! ? : ; or
    a line break, past quotes, brackets, bullets and dashes."""
    at = start
    while at > 0 and text[at - 1] in SENTENCE_LEADERS:
        at -= 1
    if at == 0:
        return True
    return text[at - 1] in SENTENCE_ENDS and not ABBREVIATION.search(text, max(0, at - 5), at)


def is_common(word: str) -> bool:
    """A word that is no name wherever it stands: a sentence opener ("The", "I'm") or a
    contraction ("They've")."""
    if word in NOT_NAMES:
        return True
    return ("'" in word or "’" in word) and CONTRACTION.search(word) is not None


def is_opener(word: str) -> bool:
    """An everyday word that may open a sentence ("Remind", "Noted", "Nature's"), or a gerund
    ("Booking", "Being"): a lowercase -ing word whose stem has a vowel and ends in neither j
    nor q, as no English verb does (Beijing and Chongqing stay names), and no listed name."""
    word = word.removesuffix("'s").removesuffix("’s")
    if word in SENTENCE_OPENERS:
        return True
    stem = word.removesuffix("ing")
    return (
        stem != word
        and stem[1:].islower()
        and stem[-1] not in ("j", "q")
        and any(letter in "aeiouy" for letter in stem.lower())
        and word not in NAMES_ENDING_ING
    )


def speaker_entity(speaker: str) -> str | None:
    """A speaker as an entity, unless it is a role ("user", "assistant"...)."""
    name = speaker.strip()
    if not name or name.lower() in ROLE_SPEAKERS:
        return None
    return name[:MAX_ENTITY_CHARS]


# Entity nodes named by a batch, upserted (so concurrent batches naming the same entity share
# it) in name order (so they take their row locks in one order and never deadlock).
ENTITY_NODES = """entity_nodes AS (
    INSERT INTO nodes (namespace, label, name, properties)
    SELECT DISTINCT :ns, 'Entity', e.name, CAST('{"auto": true}' AS jsonb)
    FROM unnest(CAST(:entity_names AS text[])) AS e(name) ORDER BY e.name
    ON CONFLICT (namespace, label, name) DO UPDATE SET name = EXCLUDED.name
    RETURNING id, name
)"""

LINK_INSIGHTS_SQL = f"""
WITH insight_nodes AS (
    INSERT INTO nodes (namespace, label, name, properties, insight_id)
    SELECT :ns, 'Insight', CAST(u.id AS text), CAST('{{"auto": true}}' AS jsonb), u.id
    FROM unnest(CAST(:ids AS bigint[])) AS u(id) ORDER BY u.id
    ON CONFLICT (namespace, label, name) DO UPDATE SET insight_id = EXCLUDED.insight_id
    RETURNING id, insight_id
),
{ENTITY_NODES}
,
links AS (
    SELECT inn.id AS source_id, en.id AS target_id, 'MENTIONS' AS relation
    FROM unnest(CAST(:link_ids AS bigint[]), CAST(:link_names AS text[])) AS m(insight_id, name)
    JOIN insight_nodes inn ON inn.insight_id = m.insight_id
    JOIN entity_nodes en ON en.name = m.name
    UNION ALL
    SELECT inn.id, tn.id, 'DERIVED_FROM'
    FROM unnest(CAST(:source_insight_ids AS bigint[]), CAST(:source_raw_ids AS bigint[]))
         AS s(insight_id, raw_id)
    JOIN insight_nodes inn ON inn.insight_id = s.insight_id
    JOIN nodes tn ON tn.namespace = :ns AND tn.label = 'Turn' AND tn.raw_id = s.raw_id
)
INSERT INTO edges (namespace, source_id, target_id, relation, properties)
SELECT DISTINCT :ns, source_id, target_id, relation, CAST('{{"auto": true}}' AS jsonb)
FROM links
ON CONFLICT DO NOTHING
"""


def turn_links(turns: Sequence[tuple[str, str]]) -> tuple[list[int], list[str], list[str]]:
    """The entity links of a batch of turns (speaker, content), as parallel arrays of the
    turn's position in the batch (from 1), the entity's name and the relation (SPOKEN_BY,
    MENTIONS). The database graphs the turns it stores with them (gql_memory_link_turns,
    migration 0010): a node per turn, NEXT edges, entity nodes and these edges."""
    positions: list[int] = []
    names: list[str] = []
    relations: list[str] = []
    for position, (speaker, content) in enumerate(turns, start=1):
        if (name := speaker_entity(speaker)) is not None:
            positions.append(position)
            names.append(name)
            relations.append(SPOKEN_BY)
        for mentioned in entity_names(content, speaker):
            positions.append(position)
            names.append(mentioned)
            relations.append(MENTIONS)
    return positions, names, relations


async def link_insights(
    conn: AsyncConnection, namespace: str, insights: Sequence[tuple[int, str, Sequence[int]]]
) -> None:
    """Graph new insights (id, content, source turn ids): a node each, MENTIONS edges to
    their entities, DERIVED_FROM edges to the nodes of their source turns."""
    if not insights:
        return
    link_ids: list[int] = []
    link_names: list[str] = []
    source_insight_ids: list[int] = []
    source_raw_ids: list[int] = []
    for insight_id, content, sources in insights:
        for mentioned in entity_names(content):
            link_ids.append(insight_id)
            link_names.append(mentioned)
        for raw_id in sources:
            source_insight_ids.append(insight_id)
            source_raw_ids.append(raw_id)
    await conn.execute(
        text(LINK_INSIGHTS_SQL),
        {
            "ns": namespace,
            "ids": [i[0] for i in insights],
            "entity_names": sorted(set(link_names)),
            "link_ids": link_ids,
            "link_names": link_names,
            "source_insight_ids": source_insight_ids,
            "source_raw_ids": source_raw_ids,
        },
    )


# What the graph builds by itself carries this in its properties.
AUTOMATIC = {"auto": True}
# Erasure: the automatic nodes of erased memories, then automatic entities nothing links to.
FORGET_ORPHAN_ENTITIES_SQL = """
DELETE FROM nodes n
WHERE n.namespace = :ns AND n.label = 'Entity' AND n.properties @> '{"auto": true}'
  AND n.id = ANY(CAST(:entity_ids AS bigint[]))
  AND NOT EXISTS (SELECT 1 FROM edges e WHERE e.namespace = :ns
                  AND (e.source_id = n.id OR e.target_id = n.id))
"""
LINKED_ENTITIES_SQL = """
SELECT DISTINCT e.target_id FROM edges e
JOIN nodes n ON n.namespace = e.namespace AND n.id = e.source_id
WHERE e.namespace = :ns AND e.relation = ANY(CAST(:entity_relations AS text[]))
  AND ((n.label = 'Turn' AND n.raw_id = ANY(CAST(:raw_ids AS bigint[])))
       OR (n.label = 'Insight' AND n.insight_id = ANY(CAST(:insight_ids AS bigint[]))))
"""


async def forget_auto_nodes(
    conn: AsyncConnection,
    namespace: str,
    raw_ids: Sequence[int] = (),
    insight_ids: Sequence[int] = (),
) -> None:
    """Before memories are erased: their automatic nodes go (edges cascade), and so do the
    automatic entities that only they mentioned (names taken from erased text)."""
    params = {"ns": namespace, "raw_ids": list(raw_ids), "insight_ids": list(insight_ids)}
    linked = {**params, "entity_relations": [MENTIONS, SPOKEN_BY]}
    entities = (await conn.execute(text(LINKED_ENTITIES_SQL), linked)).scalars().all()
    standing_for_them = or_(
        and_(nodes.c.label == TURN_LABEL, any_of(nodes.c.raw_id, raw_ids)),
        and_(nodes.c.label == INSIGHT_LABEL, any_of(nodes.c.insight_id, insight_ids)),
    )
    auto_nodes = select(nodes.c.id).where(
        nodes.c.namespace == namespace, nodes.c.properties.contains(AUTOMATIC), standing_for_them
    )
    auto = (await conn.execute(auto_nodes)).scalars().all()
    await detach(conn, "nodes", namespace, auto)
    if auto:
        await conn.execute(
            delete(nodes).where(nodes.c.namespace == namespace, any_of(nodes.c.id, auto))
        )
    if entities:
        await conn.execute(
            text(FORGET_ORPHAN_ENTITIES_SQL), {"ns": namespace, "entity_ids": list(entities)}
        )
