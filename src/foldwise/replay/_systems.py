"""The systems a trace is replayed through: foldwise and its peers, each as it ships.

Every system gets the same recorded model, the same recorded tools and the same deterministic
extractive summarizer, so only the context-management policies differ.
"""

from __future__ import annotations

import hashlib
import html
import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent as lc_create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware import SummarizationMiddleware as LCSummarization
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

import foldwise
from foldwise.agent import build_middlewares
from foldwise.config import FoldwiseConfig
from foldwise.offload import FilesystemArtifactStore
from foldwise.replay._model import ReplayChatModel
from foldwise.replay._probe import ReplayProbe, SummaryTap
from foldwise.summarizers import ExtractiveSummarizer

__all__ = [
    "DEFAULT_PEERS",
    "SYSTEM_KEYS",
    "BuildContext",
    "ReplaySystem",
    "get_system",
    "replay_config",
]

logger = logging.getLogger(__name__)

SYSTEM_KEYS = ("foldwise", "langchain", "langchain-matched", "deepagents", "raw")
"""Every system `replay` knows, foldwise first."""
DEFAULT_PEERS = ("langchain", "langchain-matched", "deepagents")
"""Peers replayed next to foldwise unless told otherwise."""
LANGCHAIN_DEFAULT_TRIGGER = ("fraction", 0.85)
"""What switches LangChain's middleware on: its own default (`trigger=None`) never summarizes.

0.85 of the window is the factory default of deepagents (built on the same middleware) and the
peer configuration of research/perf.md §5 M1."""


@dataclass
class BuildContext:
    """What every system is built from.

    Attributes:
        model: The recorded assistant.
        tools: The recorded tools.
        system_prompt: The trace's system prompt.
        checkpointer: Thread state between turns.
        probe: The innermost request probe.
        tap: Records summarizer calls.
        config: foldwise's configuration (peers read its trigger for `langchain-matched`).
        workdir: A private directory for stores; removed after the run.
        thread_id: The LangGraph thread of the run.
    """

    model: ReplayChatModel
    tools: Sequence[Any]
    system_prompt: str | None
    checkpointer: BaseCheckpointSaver[Any]
    probe: ReplayProbe
    tap: SummaryTap
    config: FoldwiseConfig
    workdir: Path
    thread_id: str = "replay"

    def langchain_agent(
        self, *middleware: AgentMiddleware[Any, Any, Any], state_schema: Any = None
    ) -> Any:
        """LangChain's `create_agent` over the trace, with `middleware` outside the probe."""
        return lc_create_agent(
            self.model,
            tools=list(self.tools),
            system_prompt=self.system_prompt,
            middleware=[*middleware, self.probe],
            checkpointer=self.checkpointer,
            state_schema=state_schema,
        )


def _extractive(messages: list[BaseMessage]) -> str:
    return ExtractiveSummarizer().summarize(messages)


def replay_config(
    config: FoldwiseConfig, workdir: Path, *, summarizer: str | None
) -> FoldwiseConfig:
    """The config as replay runs it: summaries from `summarizer`, artifacts under `workdir`."""
    summarization = config.summarization
    if summarizer is not None:
        summarization = summarization.model_copy(update={"model_name": summarizer})
    offload = config.offload.model_copy(update={"root": str(workdir / "artifacts")})
    return config.model_copy(update={"summarization": summarization, "offload": offload})


class ReplaySystem:
    """A context-management system under replay.

    Attributes:
        key: Short identifier (`foldwise`, `langchain`...).
        label: What the report calls it.
        description: One line on its configuration.
        window_limited: Whether the provider window applies (`raw` runs unbounded).
        uses_receipts: Compactions come from foldwise receipts, not from summarizer calls.
    """

    key = "system"
    label = "system"
    description = ""
    window_limited = True
    uses_receipts = False

    def unavailable(self) -> str | None:
        """Why this system cannot run here (a missing package), or `None`."""
        return None

    def build(self, ctx: BuildContext) -> Any:
        """Build the agent: `ctx.probe` must be the innermost middleware."""
        raise NotImplementedError

    def invoke_callbacks(self, ctx: BuildContext) -> list[Any]:
        """Callback handlers passed with every invoke."""
        return []

    def receipts(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """foldwise compaction receipts in the state (newest 50)."""
        return []

    def offloads(self, state: dict[str, Any]) -> dict[str, int]:
        """Stored artifacts visible in the state: key -> size in bytes."""
        return {}

    def recoverable(self, text: str, state: dict[str, Any], ctx: BuildContext) -> bool:
        """Whether `text` can be read back verbatim from what the system stored."""
        return False

    def stored_texts(self, state: dict[str, Any], ctx: BuildContext) -> list[str]:
        """Everything the system stored outside the context (artifacts, history files)."""
        return []


class FoldwiseSystem(ReplaySystem):
    """`foldwise.create_agent` with the given config, exactly as production builds it."""

    key = "foldwise"
    label = "foldwise"
    description = "foldwise.create_agent with the given config"
    uses_receipts = True

    def build(self, ctx: BuildContext) -> Any:
        extra: list[AgentMiddleware[Any, Any, Any]] = []
        offload = _offload_middleware(ctx.config)
        if offload is not None:
            extra.append(offload)
        return foldwise.create_agent(
            ctx.config,
            model=ctx.model,
            tools=list(ctx.tools),
            checkpointer=ctx.checkpointer,
            system_prompt=ctx.system_prompt,
            middleware=[*extra, ctx.probe],
        )

    def invoke_callbacks(self, ctx: BuildContext) -> list[Any]:
        return [ctx.tap]

    def receipts(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in state.get("compactions") or [] if isinstance(r, dict)]

    def offloads(self, state: dict[str, Any]) -> dict[str, int]:
        refs = state.get("offloads") or []
        return {
            str(r["artifact_id"]): int(r.get("size_bytes") or 0)
            for r in refs
            if isinstance(r, dict) and r.get("artifact_id")
        }

    def stored_texts(self, state: dict[str, Any], ctx: BuildContext) -> list[str]:
        store = FilesystemArtifactStore(ctx.config.offload.root)
        texts: list[str] = []
        for ref in store.list(ctx.thread_id):
            try:
                texts.append(store.get(ctx.thread_id, ref.artifact_id))
            except Exception:  # expired or unreadable: not recoverable
                logger.debug("artifact %s not readable", ref.artifact_id)
        return texts

    def recoverable(self, text: str, state: dict[str, Any], ctx: BuildContext) -> bool:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        store = FilesystemArtifactStore(ctx.config.offload.root)
        for ref in state.get("offloads") or []:
            if not isinstance(ref, dict) or ref.get("sha256") != digest:
                continue
            try:
                if store.get(str(ref["thread_id"]), str(ref["artifact_id"])) == text:
                    return True
            except Exception:  # a missing artifact is simply not recoverable
                logger.debug("artifact %s not readable", ref.get("artifact_id"))
        return False


def _offload_middleware(config: FoldwiseConfig) -> AgentMiddleware[Any, Any, Any] | None:
    """The offload middleware, unless disabled or already in `build_middlewares`."""
    if not config.offload.enabled:
        return None
    try:
        module = importlib.import_module("foldwise.middleware.tool_output_offload")
    except ImportError:
        logger.info("replay: ToolOutputOffloadMiddleware is not available; offload skipped")
        return None
    cls = module.ToolOutputOffloadMiddleware
    if any(isinstance(m, cls) for m in build_middlewares(config)):
        return None
    middleware: AgentMiddleware[Any, Any, Any] = cls.from_config(config)
    return middleware


class LangChainSystem(ReplaySystem):
    """LangChain v1's `SummarizationMiddleware` with its defaults (trigger switched on)."""

    key = "langchain"
    label = "LangChain default"
    description = (
        "langchain SummarizationMiddleware: trigger fraction 0.85 (its trigger=None default "
        "never summarizes), keep 20 messages, trim_tokens_to_summarize 4000, "
        "count_tokens_approximately"
    )

    def trigger(self, ctx: BuildContext) -> Any:
        return LANGCHAIN_DEFAULT_TRIGGER

    def build(self, ctx: BuildContext) -> Any:
        middleware = LCSummarization(
            ctx.model, trigger=self.trigger(ctx), summarizer=ctx.tap.wrap(_extractive)
        )
        return ctx.langchain_agent(middleware)


class LangChainMatchedSystem(LangChainSystem):
    """LangChain's middleware with foldwise's trigger clauses; its other defaults."""

    key = "langchain-matched"
    label = "LangChain, matched trigger"
    description = "langchain SummarizationMiddleware with foldwise's trigger; other defaults"

    def trigger(self, ctx: BuildContext) -> Any:
        clauses = ctx.config.summarization.trigger or []
        converted = [(c.type, c.value) for c in clauses]
        if not converted:
            return None
        return converted if len(converted) > 1 else converted[0]


class DeepAgentsSystem(ReplaySystem):
    """deepagents' main-agent context stack with its factory defaults.

    `create_deep_agent` assembles `FilesystemMiddleware` (tool results above 20,000 tokens
    evicted to files), `create_summarization_middleware(model, backend)` (fraction 0.85 /
    keep 0.10 with a model profile, whole span summarized, history offloaded to
    `/conversation_history/`) and `PatchToolCallsMiddleware`. The same stack is built here with
    the shared extractive summarizer passed as `summarizer=`; the sub-agent `task` tool and the
    provider prompt-caching middleware (a no-op off Anthropic) are left out.
    """

    key = "deepagents"
    label = "deepagents default"
    description = (
        "deepagents FilesystemMiddleware + create_summarization_middleware defaults "
        "(fraction 0.85, keep fraction 0.10, no trim) + PatchToolCallsMiddleware"
    )

    def unavailable(self) -> str | None:
        try:
            importlib.import_module("deepagents")
        except ImportError:
            return (
                "deepagents is not installed; install the `bench` dependency group "
                "(deepagents) to replay its defaults"
            )
        return None

    def build(self, ctx: BuildContext) -> Any:
        graph = importlib.import_module("deepagents.graph")
        backends = importlib.import_module("deepagents.backends")
        fs = importlib.import_module("deepagents.middleware.filesystem")
        summ = importlib.import_module("deepagents.middleware.summarization")
        patch = importlib.import_module("deepagents.middleware.patch_tool_calls")
        backend = backends.StateBackend()
        return ctx.langchain_agent(
            fs.FilesystemMiddleware(backend=backend),
            summ.create_summarization_middleware(
                ctx.model, backend, summarizer=ctx.tap.wrap(_extractive)
            ),
            patch.PatchToolCallsMiddleware(),
            state_schema=graph.DeepAgentState,
        )

    @staticmethod
    def _files(state: dict[str, Any]) -> dict[str, str]:
        files = state.get("files") or {}
        out: dict[str, str] = {}
        for path, data in files.items() if isinstance(files, dict) else []:
            content = data.get("content") if isinstance(data, dict) else None
            if isinstance(content, list):
                content = "\n".join(str(line) for line in content)
            if isinstance(content, str):
                out[str(path)] = content
        return out

    def offloads(self, state: dict[str, Any]) -> dict[str, int]:
        return {path: len(text.encode("utf-8")) for path, text in self._files(state).items()}

    def stored_texts(self, state: dict[str, Any], ctx: BuildContext) -> list[str]:
        return [html.unescape(text) for text in self._files(state).values()]

    def recoverable(self, text: str, state: dict[str, Any], ctx: BuildContext) -> bool:
        for content in self._files(state).values():
            if text in content or text in html.unescape(content):
                return True
        return False


class RawSystem(ReplaySystem):
    """No context management and an unbounded window: the reference for cost ratios."""

    key = "raw"
    label = "raw (no management, infinite window)"
    description = "langchain create_agent without context middleware; the window never rejects"
    window_limited = False

    def build(self, ctx: BuildContext) -> Any:
        return ctx.langchain_agent()


_SYSTEMS: dict[str, Callable[[], ReplaySystem]] = {
    "foldwise": FoldwiseSystem,
    "langchain": LangChainSystem,
    "langchain-matched": LangChainMatchedSystem,
    "deepagents": DeepAgentsSystem,
    "raw": RawSystem,
}


def get_system(key: str) -> ReplaySystem:
    """The system called `key` (one of `SYSTEM_KEYS`).

    Raises:
        ValueError: Unknown key.
    """
    try:
        return _SYSTEMS[key]()
    except KeyError:
        raise ValueError(f"unknown system {key!r}; use one of {', '.join(SYSTEM_KEYS)}") from None
