"""Faults of the model and of the summarizer, tried on a served gateway (see `_rel_faults`).

Each case opens a thread, lays down some history (a plain turn and a tool-call turn), sends
one turn whose answer is the fault (the `Brain` marker), and checks the reply against the case's
written expectation (`_rel_faults.CASES`) and the thread against the invariants
(`check_thread`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from foldwise.bench._openai_stub import OpenAIStub
from foldwise.bench._rel_faults_stack import Brain, Reply, Thread, check_thread, error_text

__all__ = ["CaseRun", "model_faults", "overflow_case", "summarizer_hang_case"]

MODEL_TIMEOUT = 1.0
"""The run model's client timeout (seconds) in the served config."""


@dataclass
class CaseRun:
    """What one case observed: its reply, the violations, the time."""

    case: str
    observed: str
    seconds: float
    violations: list[tuple[str, str]] = field(default_factory=list)


def _history(thread: Thread) -> list[str]:
    for text in ("hello there", "report please kb=1"):
        reply = thread.turn(text)
        if reply.status != 200:
            raise RuntimeError(f"history turn {text!r} answered {reply.status}: {reply.text[:300]}")
    return [str(m.get("id")) for m in thread.state().get("messages") or []]


def _judge_reply(reply: Reply, status: set[int], words: tuple[str, ...]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    detail = error_text(reply)
    if reply.status not in status:
        found.append(("status", f"answered {reply.status}, expected {sorted(status)}: {detail}"))
    if "Traceback" in reply.text or 'File "' in reply.text:
        found.append(("no-traceback", "the body carries a traceback"))
    if words and not any(w.lower() in detail.lower() for w in words):
        found.append(("clear-error", f"the error names none of {list(words)}: {detail[:200]}"))
    return found


@dataclass(frozen=True)
class ModelFault:
    """One scripted model fault and what the gateway must answer."""

    name: str
    response: Callable[[random.Random], object]
    status: set[int]
    words: tuple[str, ...]
    stream: bool = False
    failed: bool = True


MODEL_FAULTS: tuple[ModelFault, ...] = (
    ModelFault(
        "model times out",
        lambda r: {"content": "too late", "delay": MODEL_TIMEOUT + 1 + r.random()},
        {500, 502, 504},
        ("timed out", "timeout"),
    ),
    ModelFault(
        "model answers 429",
        lambda r: {
            "error": {
                "status": 429,
                "message": "Rate limit reached for requests",
                "type": "rate_limit_error",
            }
        },
        {429, 500, 502, 503},
        ("429", "rate limit"),
    ),
    ModelFault(
        "model answers 500",
        lambda r: {"error": {"status": 500, "message": "The server had an error"}},
        {500, 502},
        ("500",),
    ),
    ModelFault(
        "model answers invalid JSON",
        lambda r: {"raw": '{"id": "chatcmpl-1", "choices": [{"index": 0, "message": {'},
        {500, 502},
        ("model", "JSON"),
    ),
    ModelFault(
        "model answers the wrong shape",
        lambda r: {"raw": '{"id": "chatcmpl-1", "choices": "none today"}'},
        {500, 502},
        ("model",),
    ),
    ModelFault(
        "model answers an empty body",
        lambda r: {"raw": ""},
        {500, 502},
        ("model", "JSON"),
    ),
    ModelFault(
        "model answers an empty message",
        lambda r: {"content": ""},
        {200},
        (),
        failed=False,
    ),
    ModelFault(
        "model stream drops mid-answer",
        lambda r: {
            "content": "an answer that stops half-way through its sentence",
            "drop_after_chunks": r.randint(2, 5),
        },
        {502, 599},
        ("cut off",),
        stream=True,
    ),
    ModelFault(
        "model stream drops mid-tool-call",
        lambda r: {
            "tool_calls": [
                {
                    "name": "fetch_report",
                    "arguments": {"topic": "a long topic name", "kilobytes": 1},
                }
            ],
            "drop_after_chunks": r.randint(3, 5),
        },
        {502, 599},
        ("cut off",),
        stream=True,
    ),
    ModelFault(
        "model connection drops mid-answer",
        lambda r: {"content": "an answer whose body is cut", "drop_after_chunks": 0},
        {500, 502},
        ("connection",),
    ),
)


def model_faults(
    brain: Brain, thread_factory: Callable[[], Thread], rng: random.Random, round_: int
) -> list[CaseRun]:
    """Every `MODEL_FAULTS` case once, each on its own thread."""
    runs = []
    for fault in MODEL_FAULTS:
        started = time.perf_counter()
        thread = thread_factory()
        before = _history(thread)
        marker = brain.fault(f"{fault.name}/{round_}", fault.response(rng))
        text = f"{marker} what changed since yesterday?"
        reply = thread.turn(text, stream=fault.stream)
        found = _judge_reply(reply, fault.status, fault.words)
        found += check_thread(thread, before, failed=fault.failed, fault_input=text)
        observed = f"{reply.status} {error_text(reply)[:90]}" if reply.status != 200 else "200"
        runs.append(CaseRun(fault.name, observed, time.perf_counter() - started, found))
    return runs


_PROSE = (
    "The quarterly review covered the ingestion service, the nightly index and the retention "
    "rules; the team agreed to keep raw documents for thirty days and to never drop a citation. "
)


def overflow_case(
    stub: OpenAIStub,
    thread_factory: Callable[[], Thread],
    rng: random.Random,
    *,
    overcounted: bool = False,
) -> CaseRun:
    """The provider's window is smaller than configured: overflow recovery compacts, retries.

    The stub refuses prompts above 6,000 tokens (OpenAI's 400 `context_length_exceeded`, with
    the window and the count) while the gateway believes 128,000; turns of ~1,000 tokens go
    past it. English prose is counted alike by foldwise's estimate and the stub (characters /
    4); with `overcounted`, the turns are synthetic words the estimate counts ~3x higher than
    the provider does.
    """
    name = "model overflows its window" + (", estimate 3x the provider's" if overcounted else "")
    started = time.perf_counter()
    thread = thread_factory()
    found: list[tuple[str, str]] = []
    statuses = []
    stub.context_window = 6000
    try:
        for turn in range(9):
            if overcounted:
                body = " ".join(f"w{turn}x{i}" for i in range(rng.randint(560, 640)))
            else:
                body = _PROSE * rng.randint(20, 24)
            reply = thread.turn(f"note {turn}: {body}")
            statuses.append(reply.status)
            found += [(k, f"turn {turn}: {v}") for k, v in _judge_reply(reply, {200}, ())]
    finally:
        stub.context_window = None
    receipts = thread.receipts()
    if not any(r.get("trigger") == "overflow" for r in receipts):
        found.append(("recovery", f"no overflow compaction among {len(receipts)} receipts"))
    found += check_thread(thread, [], failed=False, fault_input=None)
    observed = f"{statuses.count(200)}/{len(statuses)} turns 200, {len(receipts)} compactions"
    return CaseRun(name, observed, time.perf_counter() - started, found)


def summarizer_hang_case(
    thread_factory: Callable[[], Thread], *, fallback: bool, timeout: float
) -> CaseRun:
    """The summarizer model never answers; a manual compaction with or without the fallback."""
    name = "summarizer hangs, " + ("extractive fallback" if fallback else "no fallback")
    started = time.perf_counter()
    thread = thread_factory()
    for turn in range(6):  # enough for a summary shorter than what it replaces
        reply = thread.turn(f"[[hang]] turn {turn}: we agreed the budget is {turn * 1000} euros")
        if reply.status != 200:
            raise RuntimeError(f"hang history answered {reply.status}: {reply.text[:300]}")
    before = [str(m.get("id")) for m in thread.state().get("messages") or []]
    reply = thread.compact()
    found: list[tuple[str, str]] = []
    if reply.seconds > timeout + 10:
        found.append(("bounded", f"the compaction took {reply.seconds:.1f} s"))
    if fallback:
        found += _judge_reply(reply, {200}, ())
        receipt = (reply.body or {}).get("receipt") or {}
        if reply.status == 200 and receipt.get("model_used") != "extractive":
            found.append(("fallback", f"model_used {receipt.get('model_used')!r}"))
        found += check_thread(thread, [], failed=False, fault_input=None)
        observed = (
            f"{reply.status} model_used={(reply.body or {}).get('receipt', {}).get('model_used')}"
        )
    else:
        found += _judge_reply(reply, {502}, ("timed out",))
        if thread.receipts():
            found.append(("unchanged", "a receipt was stored by a failed compaction"))
        found += check_thread(thread, before, failed=True, fault_input=None)
        observed = f"{reply.status} {error_text(reply)[:90]}"
    return CaseRun(
        name, f"{observed} in {reply.seconds:.1f} s", time.perf_counter() - started, found
    )
