"""A scripted OpenAI-compatible chat completions server on 127.0.0.1 (tests and benchmarks).

```python
with OpenAIStub(["hello", {"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}]) as stub:
    model = ChatOpenAI(base_url=stub.url + "/v1", api_key="test", model="stub", max_retries=0)
    model.invoke("hi")               # -> "hello"
    stub.requests[-1]["messages"]    # every request body is recorded
```

It serves ``POST /v1/chat/completions`` (plain JSON, or Server-Sent Events with ``stream: true``,
including the ``stream_options.include_usage`` usage chunk) and ``GET /v1/models``. Each request
takes the next scripted response:

- ``"text"`` or ``{"content": "text"}``: an assistant message;
- ``{"tool_calls": [{"name": ..., "arguments": {...}, "id": optional}], "content": optional}``;
- ``{"error": {"status": 500, "message": ..., "type": optional, "code": optional}}``: an
  OpenAI-shaped error (set ``max_retries=0`` on the client, or it retries 5xx and 429);
- ``{"raw": "text", "status": optional}``: exactly these bytes as the body (status 200 unless
  given), for garbage answers: invalid JSON, a wrong shape, an empty body;
- any of them may add ``"usage": {...}`` (overrides), ``"delay"`` (seconds before answering),
  ``"chunk_delay"`` (seconds between streamed chunks) and ``"drop_after_chunks": n`` (a streamed
  answer sends `n` chunks, then the connection closes without ``[DONE]``; a plain answer sends
  its headers and half its body, then closes).

`responses` may also be a callable ``(request_body) -> response``. `prompt_tokens` comes from
`token_counter(messages)` (default: characters / 4). With `context_window`, a prompt above it
gets OpenAI's HTTP 400 ``context_length_exceeded`` error (langchain-openai raises it as
`ContextOverflowError` with the default `overflow_style`). When the script runs out the stub
answers HTTP 400 (not retried) with code ``stub_script_exhausted``, unless `default` is set.

The server is a `ThreadingHTTPServer` speaking HTTP/1.0 (one request per connection), so
`stop` joins every request thread and closes every socket: nothing leaks between tests.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

__all__ = ["OpenAIStub", "ScriptedResponse", "content_text", "default_token_counter"]

ScriptedResponse = str | Mapping[str, Any]
Responder = Callable[[dict[str, Any]], ScriptedResponse]


def content_text(content: Any) -> str:
    """The text of an OpenAI message `content` (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def default_token_counter(messages: Sequence[Mapping[str, Any]]) -> int:
    """Count ceil(characters / 4) over message text, tool-call names and arguments."""
    chars = 0
    for message in messages:
        chars += len(content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    return max(1, math.ceil(chars / 4))


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # request threads are joined by server_close()
    block_on_close = True
    stub: OpenAIStub


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def _send_json(
        self, status: int, body: Mapping[str, Any] | bytes, *, drop: bool = False
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2] if drop else data)
            if drop:
                with self.server.stub._lock:
                    self.server.stub.dropped += 1
        except (BrokenPipeError, ConnectionResetError):
            with self.server.stub._lock:
                self.server.stub.abandoned += 1  # e.g. the client timed out before a delay

    def do_GET(self) -> None:
        """Serve ``/v1/models``."""
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = self.server.stub.model
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": model, "object": "model", "created": 0, "owned_by": "stub"}],
                },
            )
        else:
            self._send_json(404, _error("not found: " + self.path, "not_found_error"))

    def do_POST(self) -> None:
        """Serve ``/v1/chat/completions``."""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, _error("not found: " + self.path, "not_found_error"))
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, _error("request body must be a JSON object"))
            return
        status, payload = self.server.stub._respond(body)
        if "raw" in payload:
            self._send_json(status, payload["raw"])
        elif status != 200:
            self._send_json(status, payload["error_body"])
        elif body.get("stream"):
            self._stream(payload, body)
        else:
            drop = payload.get("drop_after_chunks") is not None
            self._send_json(200, payload["completion"], drop=drop)

    def _stream(self, payload: dict[str, Any], body: Mapping[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        stub = self.server.stub
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        drop_after = payload.get("drop_after_chunks")
        try:
            for sent, chunk in enumerate(stub._chunks(payload, include_usage)):
                if drop_after is not None and sent >= drop_after:
                    with stub._lock:
                        stub.dropped += 1
                    return  # the handler closes the connection: no [DONE], no final chunk
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
                if payload["chunk_delay"] and stub._stopping.wait(payload["chunk_delay"]):
                    return
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with stub._lock:
                stub.abandoned += 1  # the client hung up mid-stream (e.g. a cancelled run)


def _error(
    message: str, type_: str = "invalid_request_error", code: str | None = None, param: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class OpenAIStub:
    """A scripted OpenAI-compatible server; see the module docstring for the script format.

    Args:
        responses: Scripted responses, in order, or a callable receiving each request body.
        model: The model name reported in responses and by ``/v1/models``.
        token_counter: Computes `prompt_tokens` from the request's ``messages``.
        context_window: When set, prompts above it get the ``context_length_exceeded`` 400.
        overflow_style: The wording of that error: ``"input_tokens"`` (current OpenAI models,
            "Input tokens exceed the configured limit of N tokens...") or ``"classic"`` ("This
            model's maximum context length is N tokens..."). Both carry the code
            ``context_length_exceeded``; langchain-openai 1.7 classifies only the first as
            `ContextOverflowError` (it looks for the code in ``str(error)``, which openai 3.x no
            longer includes), so callers should also check ``error.code``.
        default: The response used once the script is exhausted (`None`: answer 400).
        chunk_size: Characters of content (or arguments) per streamed chunk.

    Attributes:
        requests: Every parsed request body, in arrival order (also rejected ones).
        abandoned: Responses whose client hung up before the end (streamed or delayed).
        dropped: Responses the stub cut short on purpose (`drop_after_chunks`).
    """

    def __init__(
        self,
        responses: Sequence[ScriptedResponse] | Responder | None = None,
        *,
        model: str = "stub",
        token_counter: Callable[[Sequence[Mapping[str, Any]]], int] | None = None,
        context_window: int | None = None,
        overflow_style: Literal["input_tokens", "classic"] = "input_tokens",
        default: ScriptedResponse | None = None,
        chunk_size: int = 8,
    ) -> None:
        self.model = model
        self.token_counter = token_counter or default_token_counter
        self.context_window = context_window
        self.overflow_style = overflow_style
        self.default = default
        self.chunk_size = max(1, chunk_size)
        self.requests: list[dict[str, Any]] = []
        self.abandoned = 0
        self.dropped = 0
        self._responder: Responder | None = responses if callable(responses) else None
        self._script: list[ScriptedResponse] = [] if callable(responses) else list(responses or [])
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (append ``/v1`` for an OpenAI client's `base_url`)."""
        if self._server is None:
            raise RuntimeError("the stub is not running; call start() or use `with`")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Bind a free loopback port and serve in a background thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-stub"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed responses, join every thread and close the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # scripting -------------------------------------------------------------------------------

    def push(self, *responses: ScriptedResponse) -> None:
        """Append responses to the script."""
        with self._lock:
            self._script.extend(responses)

    @property
    def remaining(self) -> int:
        """Scripted responses not yet used."""
        with self._lock:
            return len(self._script)

    def _next(self, body: dict[str, Any]) -> ScriptedResponse | None:
        if self._responder is not None:
            return self._responder(body)
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return self.default

    def _respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            number = next(self._ids)
        messages = body.get("messages") or []
        prompt_tokens = int(self.token_counter(messages))
        if self.context_window is not None and prompt_tokens > self.context_window:
            if self.overflow_style == "classic":
                message = (
                    f"This model's maximum context length is {self.context_window} tokens. "
                    f"However, your messages resulted in {prompt_tokens} tokens. Please reduce "
                    "the length of the messages."
                )
            else:
                message = (
                    f"Input tokens exceed the configured limit of {self.context_window} tokens. "
                    f"Your messages resulted in {prompt_tokens} tokens. Please reduce the length "
                    "of the messages."
                )
            return 400, {
                "error_body": _error(message, code="context_length_exceeded", param="messages")
            }
        scripted = self._next(body)
        if scripted is None:
            message = f"openai stub: no scripted response left for request #{number}"
            return 400, {"error_body": _error(message, code="stub_script_exhausted")}
        spec: Mapping[str, Any] = {"content": scripted} if isinstance(scripted, str) else scripted
        if spec.get("delay") and self._stopping.wait(float(spec["delay"])):
            return 503, {"error_body": _error("stub stopping", "server_error")}
        if "raw" in spec:
            return int(spec.get("status", 200)), {"raw": str(spec["raw"]).encode()}
        if "error" in spec:
            err = spec["error"]
            return int(err.get("status", 500)), {
                "error_body": _error(
                    str(err.get("message", "scripted error")),
                    str(err.get("type", "server_error")),
                    err.get("code"),
                )
            }
        return 200, self._completion(spec, number, prompt_tokens)

    def _completion(
        self, spec: Mapping[str, Any], number: int, prompt_tokens: int
    ) -> dict[str, Any]:
        content = spec.get("content")
        tool_calls: list[dict[str, Any]] = [
            {
                "id": call.get("id") or f"call_stub_{number}_{i}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call.get("arguments"), str)
                    else json.dumps(call.get("arguments") or {}),
                },
            }
            for i, call in enumerate(spec.get("tool_calls") or [])
        ]
        out_chars = len(content or "") + sum(
            len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in tool_calls
        )
        completion_tokens = max(1, math.ceil(out_chars / 4))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **dict(spec.get("usage") or {}),
        }
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        elif content is None:
            message["content"] = ""
        finish = spec.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
        completion = {
            "id": f"chatcmpl-stub-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": usage,
        }
        return {
            "completion": completion,
            "chunk_delay": float(spec.get("chunk_delay") or 0),
            "drop_after_chunks": spec.get("drop_after_chunks"),
        }

    def _chunks(self, payload: Mapping[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
        completion = payload["completion"]
        choice = completion["choices"][0]
        message = choice["message"]
        base = {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "created": completion["created"],
            "model": completion["model"],
        }
        if include_usage:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }

        size = self.chunk_size
        yield chunk({"role": "assistant", "content": ""})
        text = message.get("content") or ""
        for start in range(0, len(text), size):
            yield chunk({"content": text[start : start + size]})
        for index, call in enumerate(message.get("tool_calls") or []):
            head = {"name": call["function"]["name"], "arguments": ""}
            yield chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": head}
                    ]
                }
            )
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), size):
                piece = {"arguments": arguments[start : start + size]}
                yield chunk({"tool_calls": [{"index": index, "function": piece}]})
        yield chunk({}, choice["finish_reason"])
        if include_usage:
            yield {**base, "choices": [], "usage": completion["usage"]}
