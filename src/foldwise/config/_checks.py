"""Cross-section checks of a whole configuration: settings that are valid alone but not together.

Each check raises `ValueError("<dotted.key>: <message>")`; the loader turns it into a
`ConfigError` for that key, and the message names the other key involved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from foldwise.config._models import ContextSize, FoldwiseConfig

__all__ = ["OFFLOAD_NOTICE_CHARS", "check_budget", "check_keep_below_trigger", "check_offload"]

OFFLOAD_NOTICE_CHARS = 500
"""Upper bound of the notice and rule placed above an offload preview, in characters."""


def check_offload(config: FoldwiseConfig) -> None:
    """An offloaded text is replaced by a notice and a preview: that must be smaller than it.

    The replacement is at most `preview_chars + OFFLOAD_NOTICE_CHARS` characters. Counted at
    one token per character (denser than prose, code, JSON, base64 and CJK text), a limit at
    or below that size lets a text that is offloaded come back larger than it was.
    """
    offload = config.offload
    if not offload.enabled:
        return
    largest = offload.preview_chars + OFFLOAD_NOTICE_CHARS
    for key in ("tool_token_limit", "human_token_limit"):
        limit = getattr(offload, key)
        if 0 < limit <= largest:
            hint = f"set offload.{key} to at least {largest + 1:,}"
            if limit - OFFLOAD_NOTICE_CHARS > 200:
                hint += f" or offload.preview_chars to at most {limit - OFFLOAD_NOTICE_CHARS - 1:,}"
            raise ValueError(
                f"offload.{key}: {limit:,} tokens is not above the size of what replaces an "
                f"offloaded text (offload.preview_chars = {offload.preview_chars:,} characters "
                f"plus a notice of up to {OFFLOAD_NOTICE_CHARS}, up to {largest:,} tokens), so "
                f"offloading would make messages larger; {hint}, or 0 to disable"
            )


def check_budget(config: FoldwiseConfig) -> None:
    """The reserve for the model's output must leave room for input in every model's window."""
    reserved = config.summarization.reserved_output_tokens
    for index, model in enumerate(config.models):
        window = model.context_window
        if window is not None and reserved >= window:
            raise ValueError(
                f"summarization.reserved_output_tokens: {reserved:,} leaves no room for input in "
                f"models[{index}].context_window = {window:,} (model {model.name!r}); the "
                "request budget would collapse and every call would compact; set it below "
                f"{window:,}"
            )


def _tokens(size: ContextSize, window: int | None) -> int | None:
    """A tokens or fraction size in tokens (fractions resolved as `CompactionPolicy` does)."""
    if size.type == "tokens":
        return int(size.value)
    if size.type == "fraction" and window is not None:
        return max(1, int(window * size.value))
    return None


def _comparable(
    keep: ContextSize, clause: ContextSize, window: int | None
) -> tuple[float, float] | None:
    """`(keep, trigger)` in one unit, or None when messages meet tokens or no window is known."""
    if keep.type == clause.type:
        return keep.value, clause.value
    if "messages" in (keep.type, clause.type):
        return None
    kept, fired = _tokens(keep, window), _tokens(clause, window)
    if kept is None or fired is None:
        return None
    return kept, fired


def check_keep_below_trigger(config: FoldwiseConfig) -> None:
    """What a compaction keeps must be less than what triggers one, or it fires again at once.

    Sizes of one type are compared directly; tokens and fractions through the run model's
    (`models[0]`) `context_window` when it is known; messages never against tokens.
    """
    summarization = config.summarization
    run_model = config.model()
    window = run_model.context_window if run_model is not None else None
    keep = summarization.keep
    for index, clause in enumerate(summarization.trigger or []):
        pair = _comparable(keep, clause, window)
        if pair is None or pair[0] < pair[1]:
            continue
        via = ""
        if keep.type != clause.type:
            via = (
                f" (with models[0].context_window = {window:,}: {pair[0]:,} vs {pair[1]:,} tokens)"
            )
        raise ValueError(
            f"summarization.keep: {keep.describe()} is not below summarization.trigger[{index}] "
            f"= {clause.describe()}{via}; a compaction would keep as much as triggered it and "
            "fire again at once; lower keep or raise the trigger"
        )
