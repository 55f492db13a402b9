"""Benchmark corpus for token counting: shipped prose, this project's code, seeded JSON.

Every sample is produced offline and deterministically from a seed: English, Chinese and
Japanese prose from `corpus/*.txt` (written for this project), Python code from foldwise's own
source files, and JSON tool output from seeded generators (GitHub-issue-like records, database
rows with UUIDs and floats, Chinese search results serialized with and without
`ensure_ascii`).
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["CONTENT_CLASSES", "ContentClass", "corpus_text", "project_code", "sample_chunks"]

MIN_CHUNK_BYTES = 512
MAX_CHUNK_BYTES = 8192


@cache
def corpus_text(name: str) -> str:
    """Return the text of `corpus/<name>.txt`, shipped with the package."""
    return resources.files("foldwise.bench").joinpath("corpus", f"{name}.txt").read_text("utf-8")


@cache
def project_code() -> str:
    """Return foldwise's own Python source files, concatenated in a stable order."""
    root = Path(__file__).resolve().parents[1]
    parts = [p.read_text("utf-8") for p in sorted(root.rglob("*.py")) if "corpus" not in p.parts]
    return "\n\n".join(parts)


def _sentences(text: str) -> list[str]:
    pieces = re.split(r"(?<=[.!?。！？])\s*", text)
    return [p.strip() for p in pieces if len(p.strip()) > 8]


def _slice(rng: random.Random, text: str, size: int) -> str:
    """Cut a piece of about `size` UTF-8 bytes from `text` at a random offset."""
    ratio = len(text.encode("utf-8")) / len(text)
    chars = max(1, int(size / ratio))
    if chars >= len(text):
        return text
    start = rng.randrange(len(text) - chars)
    return text[start : start + chars]


def _ts(rng: random.Random) -> str:
    return (
        f"20{rng.randint(19, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        f"T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    )


def _issue(rng: random.Random) -> dict[str, Any]:
    prose = _sentences(corpus_text("english_prose"))
    number = rng.randint(1, 40000)
    user = rng.choice(["alice", "bob-dev", "carol99", "dmitri", "eve_ops", "fatima-k", "gwen"])
    return {
        "number": number,
        "title": rng.choice(prose)[:80],
        "state": rng.choice(["open", "closed"]),
        "user": {"login": user, "id": rng.randint(1000, 9_999_999), "type": "User"},
        "labels": rng.sample(["bug", "docs", "enhancement", "help wanted", "question", "p1"], 2),
        "comments": rng.randint(0, 60),
        "created_at": _ts(rng),
        "updated_at": _ts(rng),
        "html_url": f"https://example.org/acme/widgets/issues/{number}",
        "body": " ".join(rng.sample(prose, rng.randint(1, 4))),
    }


def _row(rng: random.Random) -> dict[str, Any]:
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "account_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "amount": round(rng.uniform(-5000, 50000), 2),
        "balance": round(rng.uniform(0, 1e6), 4),
        "quantity": rng.randint(0, 10000),
        "rate": round(rng.random(), 6),
        "currency": rng.choice(["USD", "EUR", "CNY", "JPY", "GBP"]),
        "status": rng.choice(["pending", "settled", "failed", "refunded"]),
        "created_at": _ts(rng),
        "flags": [rng.randint(0, 255) for _ in range(rng.randint(0, 4))],
    }


def _search_hit(rng: random.Random) -> dict[str, Any]:
    zh = _sentences(corpus_text("chinese_prose"))
    return {
        "title": rng.choice(zh)[:24],
        "url": f"https://news.example.cn/{rng.randint(2019, 2026)}/{rng.randint(1, 99999)}.html",
        "snippet": "".join(rng.sample(zh, rng.randint(1, 3))),
        "score": round(rng.random(), 4),
        "published": _ts(rng)[:10],
        "source": rng.choice(["新华网", "人民网", "澎湃新闻", "科技日报", "本地资讯"]),
    }


def _json_doc(
    rng: random.Random,
    size: int,
    make: Callable[[random.Random], dict[str, Any]],
    **dump: Any,
) -> str:
    items: list[dict[str, Any]] = []
    text = "[]"
    while len(text.encode("utf-8")) < size:
        items.append(make(rng))
        text = json.dumps({"total": len(items) * 7, "items": items}, **dump)
    return text


@dataclass(frozen=True)
class ContentClass:
    """One kind of content whose token density the benchmark measures."""

    key: str
    """Short identifier (`en`, `code`, `json_compact`...)."""
    label: str
    """Human label for reports."""
    make: Callable[[random.Random, int], str]
    """Produce one sample of about the given UTF-8 size from a seeded generator."""


CONTENT_CLASSES: tuple[ContentClass, ...] = (
    ContentClass("en", "English prose", lambda r, n: _slice(r, corpus_text("english_prose"), n)),
    ContentClass("code", "Python code (foldwise)", lambda r, n: _slice(r, project_code(), n)),
    ContentClass(
        "json_compact",
        "JSON compact (issues)",
        lambda r, n: _json_doc(r, n, _issue, ensure_ascii=False),
    ),
    ContentClass(
        "json_rows",
        "JSON indent=2 (UUIDs, numbers)",
        lambda r, n: _json_doc(r, n, _row, indent=2),
    ),
    ContentClass(
        "json_zh",
        "Chinese JSON, ensure_ascii=False",
        lambda r, n: _json_doc(r, n, _search_hit, ensure_ascii=False),
    ),
    ContentClass(
        "json_zh_ascii",
        "Chinese JSON, ensure_ascii=True",
        lambda r, n: _json_doc(r, n, _search_hit, ensure_ascii=True),
    ),
    ContentClass("zh", "Chinese prose", lambda r, n: _slice(r, corpus_text("chinese_prose"), n)),
    ContentClass("ja", "Japanese prose", lambda r, n: _slice(r, corpus_text("japanese_prose"), n)),
)
"""Content classes of the accuracy benchmark, in report order."""


def sample_chunks(content: ContentClass, count: int, *, seed: int = 0) -> list[str]:
    """Return `count` samples of 0.5–8 KB of `content`, deterministic for a given seed."""
    rng = random.Random(f"{seed}:{content.key}")
    return [content.make(rng, rng.randint(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES)) for _ in range(count)]
