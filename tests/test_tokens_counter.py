"""TokenCounter: per-message cache, incremental histories, requests, tools."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from foldwise.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TokenCounter,
    _cache,
    estimate_tokens,
)
from tests._factories import tool_turns


class RecordingCounter(TokenCounter):
    """A real estimate counter that records which texts it had to tokenize."""

    def __init__(self) -> None:
        self.texts: list[str] = []

        def count(text: str) -> int:
            self.texts.append(text)
            return estimate_tokens(text)

        super().__init__("estimate", count)


# -- single messages ----------------------------------------------------------------------------


def test_count_message_parts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    text = "The quick brown fox jumps over the lazy dog."
    plain = counter.count_message(HumanMessage(text))
    assert plain == MESSAGE_OVERHEAD + estimate_tokens(text)
    named = counter.count_message(HumanMessage(text, name="alice"))
    assert named > plain
    tool_msg = counter.count_message(ToolMessage(text, tool_call_id="call_abcdef123456"))
    assert tool_msg > plain
    call = {"name": "search", "args": {"query": "天气 北京", "limit": 5}, "id": "c1"}
    with_call = counter.count_message(AIMessage(text, tool_calls=[call]))
    args_json = json.dumps(call["args"], ensure_ascii=False)
    assert with_call >= plain + estimate_tokens(args_json) + estimate_tokens("search")


def test_count_message_content_blocks() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    text_only = counter.count_message(HumanMessage([{"type": "text", "text": "hello there"}]))
    assert text_only == MESSAGE_OVERHEAD + estimate_tokens("hello there")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}}
    with_image = counter.count_message(
        HumanMessage([{"type": "text", "text": "hello there"}, image])
    )
    assert with_image == text_only + IMAGE_TOKENS
    other = {"type": "reasoning", "reasoning": "first think, then act"}
    with_other = counter.count_message(HumanMessage(["hello there", other]))
    assert with_other == text_only + estimate_tokens(json.dumps(other, ensure_ascii=False))


def test_count_message_accepts_dicts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    as_dict = counter.count_message({"role": "user", "content": "hi there"})  # type: ignore[arg-type]
    assert as_dict == counter.count_message(HumanMessage("hi there"))
    assert counter.count_messages([{"role": "user", "content": "hi there"}]) == as_dict  # type: ignore[list-item]


# -- cache --------------------------------------------------------------------------------------


def test_cache_hit_returns_same_value_without_retokenizing() -> None:
    counter = RecordingCounter()
    message = HumanMessage("cached content " * 30, id="m1")
    first = counter.count_message(message)
    calls = len(counter.texts)
    assert counter.count_message(message) == first
    assert counter.count_message(HumanMessage("cached content " * 30, id="m1")) == first
    assert len(counter.texts) == calls


def test_content_change_under_same_id_recounts() -> None:
    counter = RecordingCounter()
    short = counter.count_message(HumanMessage("short", id="same"))
    long = counter.count_message(HumanMessage("much longer content " * 40, id="same"))
    assert long > short
    assert long == TokenCounter("estimate", estimate_tokens).count_message(
        HumanMessage("much longer content " * 40)
    )


def test_long_content_change_of_same_length_recounts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    words = counter.count_message(ToolMessage("word " * 2000, tool_call_id="c", id="big"))
    digits = counter.count_message(ToolMessage("1234 " * 2000, tool_call_id="c", id="big"))
    assert digits != words
    assert digits == TokenCounter("estimate", estimate_tokens).count_message(
        ToolMessage("1234 " * 2000, tool_call_id="c")
    )


def test_in_place_content_reassignment_recounts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    message = HumanMessage("tiny", id="m")
    history: list[BaseMessage] = [SystemMessage("s", id="s"), message]
    before = counter.count_messages(history)
    message.content = "now a lot bigger " * 100
    assert counter.count_message(message) > 100
    assert counter.count_messages(list(history)) > before + 100


def test_list_content_mutated_in_place_recounts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    message = HumanMessage([{"type": "text", "text": "a"}], id="blocks")
    small = counter.count_message(message)
    blocks: list[Any] = message.content  # type: ignore[assignment]
    blocks.append({"type": "text", "text": "many more words " * 50})
    assert counter.count_message(message) > small + 50


def test_tool_calls_change_recounts() -> None:
    counter = RecordingCounter()
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    first = counter.count_message(AIMessage("", id="ai", tool_calls=[call]))
    bigger = {"name": "search", "args": {"q": "a much longer query " * 30}, "id": "c1"}
    second = counter.count_message(AIMessage("", id="ai", tool_calls=[bigger]))
    assert second > first + 30
    assert counter.count_message(AIMessage("", id="ai")) < first  # calls removed
    assert counter.count_message(AIMessage("", id="ai", tool_calls=[call])) == first


def test_tool_calls_change_in_history_recounts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    history = tool_turns(3)
    before = counter.count_messages(history)
    ai = history[2]
    assert isinstance(ai, AIMessage)
    bigger = {"name": "lookup", "args": {"q": "a far longer lookup " * 40}, "id": "c0"}
    changed = [*history[:2], AIMessage(ai.content, id=ai.id, tool_calls=[bigger]), *history[3:]]
    fresh = TokenCounter("estimate", estimate_tokens).count_messages(changed)
    assert counter.count_messages(changed) == fresh > before + 40


def test_messages_without_id_use_content_key() -> None:
    counter = RecordingCounter()
    a = counter.count_message(HumanMessage("no id here " * 10))
    calls = len(counter.texts)
    assert counter.count_message(HumanMessage("no id here " * 10)) == a
    assert len(counter.texts) == calls
    assert counter.count_message(AIMessage("no id here " * 10)) == a  # same text, other role


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cache, "CACHE_LIMIT", 50)
    counter = TokenCounter("estimate", estimate_tokens)
    for i in range(200):
        counter.count_message(HumanMessage(f"m{i}", id=f"id{i}"))
    assert len(counter._cache) <= 50


# -- histories ----------------------------------------------------------------------------------


def test_count_messages_is_sum_of_message_counts() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    history = tool_turns(5)
    assert counter.count_messages(history) == sum(map(counter.count_message, history))
    assert counter.count_messages([]) == 0


def test_append_tokenizes_only_the_new_message() -> None:
    counter = RecordingCounter()
    history = tool_turns(20)
    total = counter.count_messages(history)
    counter.texts.clear()
    new = ToolMessage("fresh output " * 40, tool_call_id="c19", id="new")
    grown = [*history, new]
    assert counter.count_messages(grown) == total + counter.count_message(new)
    assert counter.texts == [new.content, "c19"]


@pytest.mark.parametrize("edit", ["replace_middle", "remove_middle", "truncate", "copies"])
def test_incremental_count_matches_fresh_counter(edit: str) -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    history = tool_turns(10)
    counter.count_messages(history)
    changed = list(history)
    if edit == "replace_middle":
        changed[7] = ToolMessage("replaced " * 80, tool_call_id="c2", id=changed[7].id)
    elif edit == "remove_middle":
        del changed[4:7]
    elif edit == "truncate":
        changed = changed[:-4]
    else:
        changed = [m.model_copy(deep=True) for m in changed]
    fresh = TokenCounter("estimate", estimate_tokens)
    assert counter.count_messages(changed) == fresh.count_messages(changed)


def test_counter_is_thread_safe() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    histories = [tool_turns(30 + i) for i in range(6)]
    expected = [TokenCounter("estimate", estimate_tokens).count_messages(h) for h in histories]
    errors: list[BaseException] = []
    results: dict[int, set[int]] = {i: set() for i in range(len(histories))}

    def work(index: int) -> None:
        try:
            for step in range(40):
                history = histories[index][: 10 + step]
                counter.count_messages(history)
            results[index].add(counter.count_messages(histories[index]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(histories))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert [results[i] for i in range(len(histories))] == [{e} for e in expected]


# -- tools --------------------------------------------------------------------------------------


@tool
def search_web(query: str, limit: int = 5) -> str:
    """Search the web and return the top results as text."""
    return query * limit


@tool
def read_file(path: str) -> str:
    """Read a UTF-8 text file from the workspace and return its content."""
    return path


def test_count_tools() -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    one = counter.count_tools([search_web])
    assert one > 20
    both = counter.count_tools([search_web, read_file])
    assert both == one + counter.count_tools([read_file])
    assert counter.count_tools([]) == 0
    assert counter.count_tools([search_web]) == one  # cached
    schema = {
        "type": "function",
        "function": {
            "name": "search_web",
            "description": "Search the web. " * 20,
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
    assert counter.count_tools([schema]) > one  # same name, different schema: not a cache hit
