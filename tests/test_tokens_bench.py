"""The token benchmark's corpus and result shapes (timing itself is not asserted)."""

from __future__ import annotations

import json
from importlib import resources

from foldwise.bench import TokenBenchResult
from foldwise.bench._tokens import _accuracy, _environment, _speed, build_history
from foldwise.bench._tokens_corpus import (
    CONTENT_CLASSES,
    MAX_CHUNK_BYTES,
    MIN_CHUNK_BYTES,
    sample_chunks,
)


def test_corpus_is_small_and_licensed() -> None:
    corpus = resources.files("foldwise.bench").joinpath("corpus")
    sizes = {entry.name: len(entry.read_bytes()) for entry in corpus.iterdir()}
    assert {"README.md", "english_prose.txt", "chinese_prose.txt"} <= set(sizes)
    assert sum(sizes.values()) < 1_000_000
    assert "Licence" in corpus.joinpath("README.md").read_text("utf-8")


def test_chunks_are_deterministic_and_sized() -> None:
    for content in CONTENT_CLASSES:
        first = sample_chunks(content, 5, seed=1)
        assert first == sample_chunks(content, 5, seed=1)
        for chunk in first:
            size = len(chunk.encode())
            # JSON documents stop at the first record past the target size.
            assert MIN_CHUNK_BYTES // 2 <= size <= MAX_CHUNK_BYTES * 1.5, (content.key, size)
    zh_ascii = next(c for c in CONTENT_CLASSES if c.key == "json_zh_ascii")
    assert "\\u" in sample_chunks(zh_ascii, 1)[0]


def test_build_history_shape() -> None:
    history = build_history(31)
    assert len(history) == 31
    assert [m.type for m in history[:4]] == ["system", "human", "ai", "tool"]
    assert len({m.id for m in history}) == 31


def test_result_serializes_and_renders() -> None:
    notes: list[str] = []
    throughput: dict[str, float] = {}
    accuracy = _accuracy(3, notes, throughput)
    speed = _speed([30], 2, exact=bool(accuracy))
    result = TokenBenchResult(
        quick=True,
        seconds=1.0,
        environment=_environment(),
        accuracy=accuracy,
        speed=speed,
        throughput=throughput,
        notes=notes,
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["environment"]["cpu_count"] >= 1
    assert data["environment"]["langchain-core"]
    assert data["speed"][0]["messages"] == 30
    markdown = result.to_markdown()
    assert "| 30 |" in markdown
    if accuracy:
        assert {row["key"] for row in data["accuracy"]} == {c.key for c in CONTENT_CLASSES}
        assert "Chinese prose" in markdown
