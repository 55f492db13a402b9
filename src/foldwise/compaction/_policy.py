"""`CompactionPolicy`: the summarization config resolved against one run model."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from foldwise.config import DEFAULT_KEEP, ContextSize, FoldwiseConfig, SummarizationConfig

__all__ = ["DEFAULT_SUMMARY_MAX_TOKENS", "CompactionPolicy", "Threshold", "summary_allowance"]

logger = logging.getLogger(__name__)

DEFAULT_SUMMARY_MAX_TOKENS = 2000
"""Room left for the summary when the run model's window is unknown."""


def summary_allowance(context_window: int | None) -> int:
    """Room the budget leaves for the summary: a sixteenth of the window, 256 to 4,000 tokens.

    A fixed 2,000 tokens would be a quarter of an 8k model's window and too little for a 1M one.
    """
    if context_window is None:
        return DEFAULT_SUMMARY_MAX_TOKENS
    return max(256, min(4000, context_window // 16))


@dataclass(frozen=True)
class Threshold:
    """One trigger clause resolved to an absolute number.

    Attributes:
        kind: `tokens`, `messages` or `fraction` (as configured).
        limit: Absolute threshold (tokens for `tokens`/`fraction`, a count for `messages`).
        source: The configured clause, for reasons and receipts.
    """

    kind: Literal["tokens", "messages", "fraction"]
    limit: int
    source: ContextSize

    def describe(self) -> str:
        """Short human form, e.g. ``tokens >= 32000`` or ``fraction 80% >= 102400 tokens``."""
        if self.kind == "fraction":
            return f"fraction {self.source.value:.0%} >= {self.limit} tokens"
        return f"{self.kind} >= {self.limit}"


@dataclass(frozen=True)
class CompactionPolicy:
    """Everything the planner needs to decide, resolved against the run model's window.

    Build it with `CompactionPolicy.from_config(config)`; construct directly in tests.
    `summary_max_tokens` is the room the planner reserves for the summary inside the budget
    (`summary_allowance` of the window when built from a config). `presummarize_at` is the
    share of the trigger at which the next summary starts in the background (`None`: never).
    """

    triggers: tuple[Threshold, ...] = ()
    keep: ContextSize = DEFAULT_KEEP
    context_window: int | None = None
    reserved_output_tokens: int = 4096
    preserve_human: Literal["all", "latest", "none"] = "all"
    preserve_human_max_tokens: int = 20000
    min_gain_tokens: int = 1000
    trim_tokens_to_summarize: int | None = 15564
    summary_prompt: str | None = None
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    presummarize_at: float | None = None
    dropped_clauses: tuple[ContextSize, ...] = field(default=(), compare=False)

    @property
    def budget_limit(self) -> int | None:
        """The hard ceiling of one request (window minus reserved output), if known."""
        if self.context_window is None:
            return None
        return max(1, self.context_window - self.reserved_output_tokens)

    def keep_tokens(self) -> int | None:
        """Keep as a token budget, or `None` when keep counts messages."""
        if self.keep.type == "tokens":
            return int(self.keep.value)
        if self.keep.type == "fraction" and self.context_window:
            return max(1, int(self.context_window * self.keep.value))
        return None

    @classmethod
    def from_summarization(
        cls,
        summarization: SummarizationConfig,
        *,
        context_window: int | None = None,
        keep: ContextSize | None = None,
    ) -> CompactionPolicy:
        """Resolve a `summarization:` block against a run model's `context_window`.

        Fraction clauses need a window: without one they are dropped with a warning (absolute
        clauses survive) and a fraction keep falls back to the default keep.
        """
        triggers, dropped = _resolve_triggers(summarization.trigger or [], context_window)
        chosen_keep = keep or summarization.keep
        if chosen_keep.type == "fraction" and context_window is None:
            dropped.append(chosen_keep)
            logger.warning(
                "keep %s needs the run model's context_window; using the default keep %s",
                chosen_keep.describe(),
                DEFAULT_KEEP.describe(),
            )
            chosen_keep = DEFAULT_KEEP
        return cls(
            triggers=tuple(triggers),
            keep=chosen_keep,
            context_window=context_window,
            reserved_output_tokens=summarization.reserved_output_tokens,
            preserve_human=summarization.preserve_human.mode,
            preserve_human_max_tokens=summarization.preserve_human.max_tokens,
            min_gain_tokens=summarization.min_gain_tokens,
            trim_tokens_to_summarize=summarization.trim_tokens_to_summarize,
            summary_prompt=summarization.summary_prompt,
            summary_max_tokens=summary_allowance(context_window),
            presummarize_at=summarization.presummarize_at,
            dropped_clauses=tuple(dropped),
        )

    @classmethod
    def from_config(
        cls,
        config: FoldwiseConfig,
        *,
        model_name: str | None = None,
        keep: ContextSize | None = None,
        context_window: int | None = None,
    ) -> CompactionPolicy:
        """Resolve the config's summarization block against the run model `model_name`.

        Args:
            config: The loaded configuration.
            model_name: The run model (default: the first configured model).
            keep: A keep override (manual compaction).
            context_window: Overrides the model's configured window.
        """
        if context_window is None:
            entry = config.model(model_name)
            context_window = entry.context_window if entry else None
        return cls.from_summarization(
            config.summarization, context_window=context_window, keep=keep
        )


def _resolve_triggers(
    clauses: list[ContextSize], context_window: int | None
) -> tuple[list[Threshold], list[ContextSize]]:
    """Resolve trigger clauses to absolute limits; fraction clauses need a window."""
    triggers: list[Threshold] = []
    dropped: list[ContextSize] = []
    for clause in clauses:
        if clause.type == "fraction":
            if context_window is None:
                dropped.append(clause)
                continue
            limit = max(1, int(context_window * clause.value))
        else:
            limit = int(clause.value)
        triggers.append(Threshold(clause.type, limit, clause))
    if dropped and not triggers:
        logger.warning(
            "every trigger clause is a fraction and the run model has no context_window: "
            "automatic compaction will not fire (manual compaction still works)"
        )
    elif dropped:
        logger.warning(
            "dropped fraction trigger clauses (the run model has no context_window): %s",
            ", ".join(c.describe() for c in dropped),
        )
    return triggers, dropped
