"""The gateway's OpenTelemetry: run spans, model-call spans, queue and lease figures.

Built on `foldwise._telemetry` (API only, no-ops without it). A run is one `invoke_agent`
span (`gen_ai.*` semantic conventions: the assistant is the agent, the thread the
conversation); while it records, a LangChain callback handler (`ModelCallTracer`) adds a
`chat {model}` client span for every chat-model call of the run, the summarizer's included.
The handler rides in the run's config next to any other callbacks (LangSmith's tracer keeps
working); it is not added when nothing records the run span, so a gateway without an SDK
pays for one no-op span per run.

`configure_from_env` is what `foldwise serve` calls: it installs the SDK from the standard
`OTEL_*` variables, or leaves OpenTelemetry alone.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig

from foldwise import _telemetry as telemetry
from foldwise._telemetry import AttributeValue

if TYPE_CHECKING:
    from foldwise.gateway._active import ActiveRun, RunSpec
    from foldwise.gateway.storage import GatewayStorage, RunRecord

__all__ = [
    "ModelCallTracer",
    "configure_from_env",
    "note_dequeued",
    "note_queue",
    "traced_enqueue",
    "traced_run",
]

logger = logging.getLogger(__name__)

_SUMMARIZE_TAG = "foldwise:summarize"
_queued: dict[str, float] = {}
"""Seconds each claimed queued run waited, until its run span ends."""


class ModelCallTracer(BaseCallbackHandler):
    """A `chat {model}` span per chat-model call (`gen_ai.*` attributes, token usage).

    Spans start as children of the span current when the call starts (the run's), and end
    when the call ends or fails. Only ids, model names, counts and finish reasons are
    recorded, never the messages.
    """

    run_inline = True  # called in the caller's context: the run span is the parent
    raise_error = False

    def __init__(self) -> None:
        self._spans: dict[UUID, telemetry.SpanLike] = {}

    @property
    def ignore_chain(self) -> bool:
        """Chains (graph nodes) are not model calls."""
        return True

    @property
    def ignore_agent(self) -> bool:
        """Agent actions are not model calls."""
        return True

    @property
    def ignore_retriever(self) -> bool:
        """Retrievers are not model calls."""
        return True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events are not model calls."""
        return True

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start the call's span."""
        meta = metadata or {}
        model = str(meta.get("ls_model_name") or (serialized or {}).get("name") or "unknown")
        attributes: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": meta.get("ls_provider"),
            "foldwise.summarizer": _SUMMARIZE_TAG in (tags or ()),
            "foldwise.run.id": meta.get("run_id"),
        }
        self._spans[run_id] = telemetry.open_span(f"chat {model}", attributes)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the usage and end the span."""
        opened = self._spans.pop(run_id, None)
        if opened is None:
            return
        for key, value in _usage(response).items():
            opened.set_attribute(key, value)
        opened.end()

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Mark the span failed and end it."""
        opened = self._spans.pop(run_id, None)
        if opened is not None:
            telemetry.mark_error(opened, error)
            opened.end()

    def end_open(self) -> None:
        """End the spans of calls that never reported an end, as cancelled (the run is over).

        LangChain tells callbacks nothing when `agenerate` itself is cancelled (a cancelled run,
        a summarizer timeout): without this such a span would never end, nor be exported.
        """
        for run_id in list(self._spans):  # a blocking call may still end in its thread
            opened = self._spans.pop(run_id, None)
            if opened is not None:
                telemetry.mark_error(opened, "CancelledError")
                opened.end()


def _usage(response: LLMResult) -> dict[str, AttributeValue]:
    """Token usage, response model and finish reason of the first generation."""
    found: dict[str, AttributeValue] = {}
    generations = response.generations[0] if response.generations else []
    message = getattr(generations[0], "message", None) if generations else None
    usage = getattr(message, "usage_metadata", None) or {}
    if usage.get("input_tokens") is not None:
        found["gen_ai.usage.input_tokens"] = int(usage["input_tokens"])
    if usage.get("output_tokens") is not None:
        found["gen_ai.usage.output_tokens"] = int(usage["output_tokens"])
    meta = getattr(message, "response_metadata", None) or {}
    if isinstance(meta.get("model_name"), str):
        found["gen_ai.response.model"] = meta["model_name"]
    reason = meta.get("finish_reason") or meta.get("stop_reason")
    if isinstance(reason, str):
        found["gen_ai.response.finish_reasons"] = [reason]
    return found


def _with_tracer(config: RunnableConfig, tracer: ModelCallTracer) -> RunnableConfig:
    """`config` with `tracer` added to its callbacks (a list, or a manager)."""
    callbacks = config.get("callbacks")
    if callbacks is None:
        return {**config, "callbacks": [tracer]}
    if isinstance(callbacks, list):
        return {**config, "callbacks": [*callbacks, tracer]}
    manager = callbacks.copy()
    manager.add_handler(tracer, inherit=True)
    return {**config, "callbacks": manager}


def _run_attributes(run_id: str, spec: RunSpec) -> dict[str, AttributeValue | None]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": spec.assistant_id,
        "gen_ai.conversation.id": spec.thread_id,
        "gen_ai.request.model": spec.model_name,
        "foldwise.run.id": run_id,
        "foldwise.thread.id": spec.thread_id,
        "foldwise.assistant.id": spec.assistant_id,
        "foldwise.run.streamed": bool(spec.stream_modes),
        "foldwise.run.input_messages": len(spec.messages),
    }


async def traced_run(
    run: ActiveRun,
    config: RunnableConfig,
    execute: Callable[[ActiveRun, RunnableConfig], Awaitable[None]],
) -> None:
    """`execute(run, config)` inside the run's span; its status and duration recorded.

    `execute` finishes the run whatever happens (`RunManager._execute`): `run.status` is
    final when it returns.
    """
    started = time.perf_counter()
    name = f"invoke_agent {run.spec.assistant_id}"
    tracer: ModelCallTracer | None = None
    try:
        with telemetry.span(name, _run_attributes(run.run_id, run.spec), current=True) as span:
            if span.is_recording():
                tracer = ModelCallTracer()
                config = _with_tracer(config, tracer)
            try:
                await execute(run, config)
            finally:
                if tracer is not None:
                    tracer.end_open()  # before the run's span: children end first
            span.set_attribute("foldwise.run.status", run.status)
            queued = _queued.pop(run.run_id, None)
            span.set_attribute("foldwise.run.queued", queued is not None)
            if queued is not None:
                span.set_attribute("foldwise.run.queued_ms", round(queued * 1000, 3))
            if run.status == "error":
                telemetry.mark_error(span, run.error or "error")
    finally:
        _queued.pop(run.run_id, None)
        labels = {"foldwise.run.status": run.status, "gen_ai.agent.name": run.spec.assistant_id}
        telemetry.record("foldwise.run.duration", time.perf_counter() - started, labels)


async def traced_enqueue(
    enqueue: Callable[[RunSpec], Awaitable[RunRecord]], spec: RunSpec
) -> RunRecord:
    """`enqueue(spec)` inside a `foldwise.queue.enqueue` span."""
    attributes = {"foldwise.thread.id": spec.thread_id, "foldwise.assistant.id": spec.assistant_id}
    with telemetry.span("foldwise.queue.enqueue", attributes) as span:
        record = await enqueue(spec)
        span.set_attribute("foldwise.run.id", record.run_id)
        return record


def note_dequeued(run: ActiveRun, record: RunRecord) -> None:
    """A queued run starts here: record its wait (span, histogram, its run span's attribute)."""
    if not telemetry.AVAILABLE:
        return
    now = datetime.now(UTC)
    waited = max(0.0, (now - record.created_at).total_seconds())
    _queued[run.run_id] = waited
    telemetry.record("foldwise.queue.wait", waited, {"foldwise.assistant.id": record.assistant_id})
    attributes: dict[str, AttributeValue | None] = {
        "foldwise.run.id": run.run_id,
        "foldwise.thread.id": run.thread_id,
        "foldwise.queue.wait_ms": round(waited * 1000, 3),
    }
    end = time.time_ns()
    start = end - int(waited * 1_000_000_000)
    with telemetry.span("foldwise.queue.dequeue", attributes, start_time=start, end_time=end):
        pass


_QUEUE_LOOK_SECONDS = 1.0
"""The queue gauges' figures are read from the database at most this often per storage."""
_queue_looks: weakref.WeakKeyDictionary[GatewayStorage, float] = weakref.WeakKeyDictionary()


async def note_queue(storage: GatewayStorage) -> None:
    """Read the queue's depth and oldest age for the gauges (throttled; only with metrics)."""
    if not telemetry.metrics_enabled():
        return
    now = time.monotonic()
    if now - _queue_looks.get(storage, -_QUEUE_LOOK_SECONDS) < _QUEUE_LOOK_SECONDS:
        return
    _queue_looks[storage] = now
    depth, oldest = await storage.queue_stats()
    telemetry.observe_queue(depth, oldest)


_EXPORTER_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER")
_ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
_OTLP_HTTP = "otlp_proto_http"
"""The exporter of the `otel` extra: the default when only an OTLP endpoint is set."""


def configure_from_env() -> bool:
    """Install the OpenTelemetry SDK from the `OTEL_*` variables, if they ask for export.

    Nothing happens (returns `False`) when the SDK is not installed, when no exporter or OTLP
    endpoint variable is set, when `OTEL_SDK_DISABLED=true`, or when the application already
    installed a tracer or meter provider. Otherwise the SDK's own environment configuration
    runs (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, exporters, protocols, headers,
    sampler...); a signal whose exporter variable is unset but which has an OTLP endpoint
    gets the OTLP/HTTP exporter the `otel` extra ships.
    """
    if not any(os.environ.get(v) for v in (*_EXPORTER_VARIABLES, *_ENDPOINT_VARIABLES)):
        return False
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk._configuration import _initialize_components
    except ImportError:
        logger.warning("OTEL_* is set but the OpenTelemetry SDK is not: pip install foldwise[otel]")
        return False
    if not _unconfigured(trace.get_tracer_provider(), metrics.get_meter_provider()):
        logger.info("OpenTelemetry is already configured by the application; left as it is")
        return False
    has_endpoint = any(os.environ.get(v) for v in _ENDPOINT_VARIABLES)
    defaults = {
        signal: [_OTLP_HTTP] if has_endpoint and not os.environ.get(variable) else []
        for signal, variable in (
            ("traces", _EXPORTER_VARIABLES[0]),
            ("metrics", _EXPORTER_VARIABLES[1]),
        )
    }
    try:
        _initialize_components(
            trace_exporter_names=defaults["traces"], metric_exporter_names=defaults["metrics"]
        )
    except Exception as error:
        logger.error("OpenTelemetry could not be configured from OTEL_*: %s", error)
        return False
    logger.info("OpenTelemetry configured from the OTEL_* environment variables")
    return True


def _unconfigured(*providers: Any) -> bool:
    """Whether every provider is still the API's placeholder (no SDK installed yet).

    A no-op provider is not a placeholder: only an application sets one (to turn a signal off).
    """
    placeholders = {"ProxyTracerProvider", "_ProxyMeterProvider"}
    return all(type(p).__name__ in placeholders for p in providers)
