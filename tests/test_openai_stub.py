"""The OpenAI-compatible stub server, driven through `langchain_openai.ChatOpenAI`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.support import OpenAIStub, default_token_counter


@tool
def search(query: str) -> str:
    """Search the docs."""
    return query


def chat(stub: OpenAIStub, **kwargs: Any) -> ChatOpenAI:
    kwargs.setdefault("max_retries", 0)
    return ChatOpenAI(base_url=stub.url + "/v1", api_key="test", model="stub", **kwargs)


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def test_invoke_returns_content_and_usage(stub: OpenAIStub) -> None:
    stub.push("hello there")
    result = chat(stub).invoke([HumanMessage("hi, how are you?")])
    assert result.content == "hello there"
    assert result.usage_metadata is not None
    expected = default_token_counter([{"role": "user", "content": "hi, how are you?"}])
    assert result.usage_metadata["input_tokens"] == expected == 4
    assert result.usage_metadata["output_tokens"] == 3
    assert result.usage_metadata["total_tokens"] == 7
    [request] = stub.requests
    assert request["model"] == "stub"
    assert request["messages"] == [{"role": "user", "content": "hi, how are you?"}]
    assert not request.get("stream")


async def test_ainvoke(stub: OpenAIStub) -> None:
    stub.push({"content": "async hello"})
    result = await chat(stub).ainvoke("hi")
    assert result.content == "async hello"
    assert stub.remaining == 0


def test_stream_yields_chunks_and_usage(stub: OpenAIStub) -> None:
    text = "a streamed answer that spans several chunks"
    stub.push(text)
    chunks = list(chat(stub, stream_usage=True).stream("hi"))
    assert len([c for c in chunks if c.content]) > 3
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert isinstance(merged, AIMessageChunk)
    assert merged.content == text
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["input_tokens"] == 1
    assert merged.usage_metadata["output_tokens"] == 11
    request = stub.requests[-1]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


async def test_astream_without_usage_option(stub: OpenAIStub) -> None:
    stub.push("streamed without usage")
    chunks = [c async for c in chat(stub).astream("hi")]
    assert "".join(str(c.content) for c in chunks) == "streamed without usage"
    assert "stream_options" not in stub.requests[-1]


def test_bind_tools_tool_call(stub: OpenAIStub) -> None:
    stub.push({"tool_calls": [{"name": "search", "arguments": {"query": "foldwise"}}]})
    result = chat(stub).bind_tools([search]).invoke("look it up")
    assert result.tool_calls == [
        {
            "name": "search",
            "args": {"query": "foldwise"},
            "id": "call_stub_1_0",
            "type": "tool_call",
        }
    ]
    [request] = stub.requests
    assert request["tools"][0]["function"]["name"] == "search"


def test_streamed_tool_call_with_content(stub: OpenAIStub) -> None:
    stub.push(
        {
            "content": "Let me check.",
            "tool_calls": [
                {"name": "search", "arguments": {"query": "a fairly long query"}, "id": "c1"},
                {"name": "search", "arguments": {"query": "second"}, "id": "c2"},
            ],
        }
    )
    chunks = list(chat(stub).bind_tools([search]).stream("look it up"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert merged.content == "Let me check."
    assert [(c["id"], c["args"]) for c in merged.tool_calls] == [  # type: ignore[attr-defined]
        ("c1", {"query": "a fairly long query"}),
        ("c2", {"query": "second"}),
    ]


def test_custom_token_counter_sets_prompt_tokens() -> None:
    with OpenAIStub(["ok"], token_counter=lambda messages: 1000 * len(messages)) as stub:
        result = chat(stub).invoke([HumanMessage("a"), HumanMessage("b")])
    assert result.usage_metadata is not None
    assert result.usage_metadata["input_tokens"] == 2000


def test_context_window_overflow_raises() -> None:
    with OpenAIStub(["never used"], context_window=10) as stub:
        model = chat(stub)
        with pytest.raises(ContextOverflowError) as info:
            model.invoke("x" * 100)
        assert isinstance(info.value, openai.BadRequestError)
        assert info.value.status_code == 400
        assert info.value.code == "context_length_exceeded"
        assert "exceed the configured limit of 10 tokens" in str(info.value)
        with pytest.raises(ContextOverflowError):
            list(model.stream("y" * 100))
        assert len(stub.requests) == 2  # rejected requests are recorded too
        assert stub.remaining == 1
        assert model.invoke("short").content == "never used"


def test_classic_overflow_wording_carries_the_code() -> None:
    with (
        OpenAIStub(["unused"], context_window=10, overflow_style="classic") as stub,
        pytest.raises(openai.BadRequestError) as info,
    ):
        chat(stub).invoke("x" * 100)
    assert info.value.code == "context_length_exceeded"
    assert "maximum context length is 10 tokens" in str(info.value)
    assert "resulted in 25 tokens" in str(info.value)


def test_callable_script_and_scripted_errors() -> None:
    def echo(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        if last == "fail":
            return {"error": {"status": 500, "message": "upstream exploded"}}
        return {"content": f"echo: {last}"}

    with OpenAIStub(echo) as stub:
        assert chat(stub).invoke("ping").content == "echo: ping"
        with pytest.raises(openai.InternalServerError, match="upstream exploded"):
            chat(stub).invoke("fail")
        assert [r["messages"][-1]["content"] for r in stub.requests] == ["ping", "fail"]


def test_exhausted_script_fails_fast_unless_default() -> None:
    with OpenAIStub([]) as stub:
        with pytest.raises(openai.BadRequestError, match="no scripted response left"):
            chat(stub, max_retries=2).invoke("hi")
        assert len(stub.requests) == 1  # a 400 is not retried
    with OpenAIStub([], default="fallback") as stub:
        assert chat(stub).invoke("hi").content == "fallback"
        assert chat(stub).invoke("hi").content == "fallback"


def test_models_endpoint_and_unknown_paths(stub: OpenAIStub) -> None:
    with httpx.Client(base_url=stub.url) as client:
        models = client.get("/v1/models").json()
        assert models["data"][0]["id"] == "stub"
        assert client.get("/nope").status_code == 404
        assert client.post("/v1/chat/completions", content=b"not json").status_code == 400
    assert stub.requests == []


def test_start_and_stop_leave_no_threads_or_sockets() -> None:
    before = set(threading.enumerate())
    stub = OpenAIStub(["one", {"content": "slow", "delay": 30}])
    stub.start()
    assert stub.start() is stub  # idempotent
    url = stub.url
    assert chat(stub).invoke("hi").content == "one"
    slow = threading.Thread(target=lambda: httpx.post(url + "/v1/chat/completions", json={}))
    slow.start()
    while len(stub.requests) < 2:
        time.sleep(0.01)
    started = time.monotonic()
    stub.stop()  # wakes the delayed response instead of waiting 30 s
    slow.join()
    assert time.monotonic() - started < 5
    stub.stop()  # idempotent
    assert set(threading.enumerate()) <= before
    with pytest.raises(RuntimeError, match="not running"):
        _ = stub.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models")


def test_a_stream_the_client_abandons_is_counted(stub: OpenAIStub) -> None:
    stub.push({"content": "x" * 400, "chunk_delay": 0.05})
    body = {"model": "stub", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", stub.url + "/v1/chat/completions", json=body) as response:
        assert next(response.iter_lines()).startswith("data: ")
    deadline = time.monotonic() + 10
    while stub.abandoned == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.abandoned == 1


def test_raw_bodies_are_sent_verbatim(stub: OpenAIStub) -> None:
    stub.push({"raw": "{not json"}, {"raw": '{"choices": "wrong"}'}, {"raw": "", "status": 200})
    for _ in range(3):
        with pytest.raises(Exception) as caught:
            chat(stub).invoke("hi")
        assert not isinstance(caught.value, AssertionError)
    assert len(stub.requests) == 3


def test_a_stream_dropped_after_n_chunks_has_no_done(stub: OpenAIStub) -> None:
    stub.push({"content": "a long answer cut in the middle", "drop_after_chunks": 2})
    with httpx.stream(
        "POST",
        stub.url + "/v1/chat/completions",
        json={"model": "stub", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ) as response:
        body = response.read().decode()
    assert body.count("data: ") == 2
    assert "[DONE]" not in body
    assert stub.dropped == 1


def test_a_plain_answer_dropped_midway_is_truncated(stub: OpenAIStub) -> None:
    stub.push({"content": "half of this arrives", "drop_after_chunks": 0})
    with pytest.raises(httpx.TransportError):
        httpx.post(
            stub.url + "/v1/chat/completions",
            json={"model": "stub", "messages": [{"role": "user", "content": "x"}]},
        )
    assert stub.dropped == 1


def test_a_client_that_times_out_before_a_delayed_answer_leaves_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIStub([{"content": "late " * 20000, "delay": 0.5}]) as stub:
        with pytest.raises(openai.APITimeoutError):
            chat(stub, timeout=0.1).invoke("hi")
        time.sleep(0.7)
    assert "Traceback" not in capsys.readouterr().err
    assert stub.abandoned == 1  # a 100 kB answer cannot fit the closed socket's buffer
