"""Session `corpus_timeline`: a small question over a big corpus.

The user asks for a dated timeline across a seven-book saga (invented for foldwise: the
Amberline Chronicles); the agent runs two dozen corpus searches of about 47,000 characters each
and writes running notes. Retrieval outgrows any summary, which is where offloading pays.
"""

from __future__ import annotations

import random

from langchain_core.messages import BaseMessage

from foldwise.replay.sessions._text import SessionBuilder, fill, pick

__all__ = ["build_corpus_timeline"]

_SYSTEM = (
    "You are a literary research agent. Tools: search_corpus(query, book) returns passages of "
    "the Amberline Chronicles with book and chapter; read_passage(ref) returns one passage. "
    "Cite book and chapter for every claim and keep a running timeline."
)
_BOOKS = [
    "The Salt Ledger",
    "Harbour of Quiet Bells",
    "The Cartographer's Winter",
    "Ashes at Meridian",
    "The Tidewright",
    "A Lamp for Hollow Sound",
    "The Last Keeper",
]
_PEOPLE = [
    "Ilse Varga",
    "Tomas Brell",
    "Maren Oakhollow",
    "Captain Edda Rusk",
    "old Pell",
    "Jory Fane",
    "the harbourmaster Corwin",
    "Sister Agathe",
    "Nils Amberline",
    "the smuggler Wren",
]
_PLACES = [
    "the Meridian Lighthouse",
    "Hollow Sound",
    "the Salt Quay",
    "Greyfen marsh",
    "Kestrel Point",
    "the customs house",
    "the chapel on the cliff",
    "the northern breakwater",
]
_EVENTS = [
    "relit the great lamp after the winter storm",
    "found the second logbook hidden behind the lens housing",
    "signed the harbour charter with the guild of pilots",
    "lost the supply cutter on the reef below {place}",
    "quarrelled with {person} over the keeper's wages",
    "recorded a green flash over the water and wrote that the tide ran backwards",
    "buried the drowned sailors in the churchyard above {place}",
    "learned that the lens had been ground in the glassworks of Vell",
    "sent the first telegraph message from {place}",
    "watched the breakwater give way during the equinox gale",
]
_SEASONS = ["spring", "summer", "autumn", "winter", "the first week of March", "midsummer"]
_COLOUR = [
    "The weather had turned, and the gulls sat on the rail as if waiting for orders.",
    "Nobody in the village spoke of it afterwards, although everyone seemed to know.",
    "The entry is written in a hurried hand, with a blot where the pen had stopped.",
    "Later chapters contradict this date, which the narrator admits with some embarrassment.",
    "The harbour records for that year were burned, so this is the only account.",
    "It rained for nine days, and the lamp oil had to be carried up by hand.",
]


def _passage(rng: random.Random, index: int, query: str) -> str:
    book = rng.randrange(len(_BOOKS))
    year = 1838 + book * 3 + rng.randint(0, 4)
    event = pick(rng, _EVENTS).format(place=pick(rng, _PLACES), person=pick(rng, _PEOPLE))
    sentences = [
        f"In the {pick(rng, _SEASONS)} of {year}, {pick(rng, _PEOPLE)} {event}.",
        pick(rng, _COLOUR),
        f"{pick(rng, _PEOPLE)} was at {pick(rng, _PLACES)} that evening and later told "
        f"{pick(rng, _PEOPLE)} a different story.",
        pick(rng, _COLOUR),
    ]
    rng.shuffle(sentences)
    return (
        f"--- result {index + 1} | Book {book + 1}: {_BOOKS[book]}, chapter {rng.randint(1, 40)}"
        f" | score {rng.uniform(0.4, 0.99):.3f} | query: {query}\n" + " ".join(sentences) + "\n\n"
    )


def _search(rng: random.Random, query: str, chars: int) -> str:
    return fill(rng, chars, lambda r, i: _passage(r, i, query))


def _notes(rng: random.Random, round_no: int) -> str:
    years = sorted(rng.sample(range(1838, 1862), 4))
    entries = "\n".join(
        f"- {y}: {pick(rng, _PEOPLE)} at {pick(rng, _PLACES)} (Book {rng.randint(1, 7)}, "
        f"ch. {rng.randint(1, 40)})"
        for y in years
    )
    return (
        f"Timeline notes after search round {round_no}:\n{entries}\n"
        "Next I will search the next book."
    )


def _search_round(b: SessionBuilder, rng: random.Random, index: int, size: int) -> None:
    """Search round `index`: every third also reads a passage and writes running notes."""
    book = _BOOKS[index % len(_BOOKS)]
    query = f"Meridian Lighthouse {pick(rng, ['keeper', 'storm', 'lamp', 'logbook', 'wreck'])}"
    if index % 3 == 2:
        b.tool_round(
            f"Searching {book} and the next book in parallel.",
            [
                ("search_corpus", {"query": query, "book": book}, _search(rng, query, size)),
                (
                    "read_passage",
                    {"ref": f"{book} ch. {rng.randint(1, 40)}"},
                    _search(rng, "passage", size // 8),
                ),
            ],
        )
        b.say(_notes(rng, index + 1))
    else:
        b.tool_round(
            f"Searching {book} for {query}.",
            [("search_corpus", {"query": query, "book": book}, _search(rng, query, size))],
        )


def build_corpus_timeline(*, quick: bool = False, seed: int = 2) -> list[BaseMessage]:
    """The session's messages (`quick`: fewer, shorter searches)."""
    rng = random.Random(f"timeline:{seed}")
    size = 16_000 if quick else 47_000
    rounds = 8 if quick else 24
    b = SessionBuilder("tl", _SYSTEM)
    b.ask(
        "Build a complete, dated timeline of every event involving the Meridian Lighthouse "
        "across all seven Amberline Chronicles books. Cite book and chapter for each entry, "
        "and flag dates that the books contradict."
    )
    for index in range(rounds):
        _search_round(b, rng, index, size)
        if index in (rounds // 3, 2 * rounds // 3):
            if index % 3 != 2:
                b.say(_notes(rng, index + 1))
            b.ask(
                "Focus on the years before 1850 first, and include every storm."
                if index == rounds // 3
                else "Also list who was keeper in each year; use the logbooks as ground truth."
            )
    b.say(
        "Timeline of the Meridian Lighthouse (1838–1861), with keepers and storms, each entry "
        "cited by book and chapter; contradictions between Books 3 and 5 are flagged."
    )
    return [m for m in b.messages if isinstance(m, BaseMessage)]
