"""The per-message cache keeps fingerprints and counts, never message content (issue 10, 15)."""

from __future__ import annotations

import base64
import gc
import os
import tracemalloc

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, TokenCounter, _cache, estimate_tokens

MB = 1024 * 1024


def _image_message(index: int) -> HumanMessage:
    data = base64.b64encode(os.urandom(3 * MB // 4)).decode()  # 1 MB of base64
    return HumanMessage(
        [
            {"type": "text", "text": f"what is in picture {index}?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        ],
        id=f"img{index}",
    )


def test_cache_does_not_retain_image_content() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for index in range(20):
            message = _image_message(index)
            for _ in range(5):
                assert counter.count_message(message) > IMAGE_TOKENS + MESSAGE_OVERHEAD
                assert counter.count_message(message.model_copy()) > IMAGE_TOKENS
            del message
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    # 20 MB of images went through; only fingerprints and counts may stay.
    assert retained < MB // 10, retained
    assert counter._cache.bytes < 20 * (_cache.ENTRY_BYTES + 100)


def test_image_cache_hit_and_in_place_change() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    message = _image_message(0)
    first = counter.count_message(message)
    assert counter.count_message(message.model_copy(deep=True)) == first  # equal copy: a hit
    blocks = message.content
    assert isinstance(blocks, list)
    blocks[0] = {"type": "text", "text": "describe every object in this picture " * 20}
    assert counter.count_message(message) > first + 50


def test_equal_shapes_of_different_types_do_not_collide() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    as_dict = counter.count_message(HumanMessage([{"type": "note", "k": 1}], id="m"))
    as_bool = counter.count_message(HumanMessage([{"type": "note", "k": True}], id="m"))
    fresh = TokenCounter("estimate", estimate_tokens)
    assert as_bool == fresh.count_message(HumanMessage([{"type": "note", "k": True}]))
    assert as_dict == fresh.count_message(HumanMessage([{"type": "note", "k": 1}]))


def test_tool_call_args_are_not_retained() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    big = "x" * MB
    call = {"name": "write_file", "args": {"path": "a", "text": big}, "id": "c1"}
    counter.count_message(AIMessage("", id="ai", tool_calls=[call]))
    entry = counter._cache.get("ai")
    assert entry is not None
    assert all(
        not isinstance(getattr(entry, slot), list | tuple | dict) for slot in entry.__slots__
    )


def test_cache_is_bounded_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cache, "CACHE_BYTES_LIMIT", 50_000)
    counter = TokenCounter("estimate", estimate_tokens)
    messages: list[BaseMessage] = [
        HumanMessage(f"m{i}", id=f"{'long-id-' * 20}{i}") for i in range(1_000)
    ]
    for message in messages:
        counter.count_message(message)
    assert counter._cache.bytes <= 50_000
    assert 0 < len(counter._cache) < 1_000
    # Evicted entries are recounted correctly.
    assert counter.count_message(messages[0]) == MESSAGE_OVERHEAD + estimate_tokens("m0")
