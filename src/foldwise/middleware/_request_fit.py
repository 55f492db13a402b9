"""Fitting one model request into the window: its fixed head, clipping, provider numbers.

Pure helpers of `SummarizationMiddleware.wrap_model_call`. A request's messages are laid out
as `[leading system messages, authority contract, durable data message, conversation...]`
(the durable-context projection puts its block right after the leading system messages), so
the fixed head is found by looking at the first few positions only: the per-call cost does not
grow with the conversation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage, ToolMessage

from foldwise.durable import AUTHORITY_CONTRACT, is_durable_data_message
from foldwise.messages import message_text
from foldwise.tokens import TokenCounter

__all__ = [
    "OVERFLOW_SHRINK",
    "clip_largest",
    "is_context_overflow",
    "overflow_numbers",
    "split_head",
    "strip_contract",
]

logger = logging.getLogger(__name__)

OVERFLOW_SHRINK = 2.0
"""Assumed under-count when a provider refuses a request without saying by how much."""

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)
_CLIP_NOTE = "\n[… {count:,} characters clipped from this view to fit the context window …]\n"
_MIN_CLIP_TOKENS = 200
# "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens",
# "prompt is too long: 210000 tokens > 200000 maximum", "12000 input tokens exceed the 4000-token
# window": the limit is the number next to "maximum"/"window"/"limit", the request the other.
_LIMIT = re.compile(
    r"(?:maximum(?: context length)?(?: is)?|limit(?: is)?|window(?: is| of)?)\D{0,12}?"
    r"([\d,]{3,})|([\d,]{3,})[- ]?(?:tokens?)?[- ](?:token )?(?:window|maximum|limit)",
    re.IGNORECASE,
)
_TOKENS = re.compile(r"([\d,]{3,})\s*(?:input\s+)?tokens?", re.IGNORECASE)


def is_context_overflow(error: BaseException) -> bool:
    """Whether a provider error says the request did not fit the model's window."""
    if isinstance(error, ContextOverflowError):
        return True
    if getattr(error, "code", None) in ("context_length_exceeded", "string_above_max_length"):
        return True
    text = str(error).lower()
    return any(marker in text for marker in _OVERFLOW_MARKERS)


def _number(text: str) -> int | None:
    try:
        value = int(text.replace(",", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def overflow_numbers(error: BaseException) -> tuple[int | None, int | None]:
    """The provider's window and its count of the refused request, when the error says them."""
    text = str(error)
    limit = None
    match = _LIMIT.search(text)
    if match:
        limit = _number(match.group(1) or match.group(2))
    counts = [_number(m.group(1)) for m in _TOKENS.finditer(text)]
    request = max((c for c in counts if c is not None and c != limit), default=None)
    if request is not None and limit is not None and request <= limit:
        request = None
    return limit, request


def split_head(messages: Sequence[AnyMessage]) -> int:
    """How many leading messages are fixed (system messages and the durable data block)."""
    lead = 0
    for message in messages:
        if isinstance(message, SystemMessage) or is_durable_data_message(message):
            lead += 1
        else:
            break
    return lead


def strip_contract(system: SystemMessage | None) -> SystemMessage | None:
    """The system message without an authority contract merged into it (`merge_contract`)."""
    if system is None:
        return None
    text = system.text
    if text == AUTHORITY_CONTRACT:
        return None
    suffix = f"\n\n{AUTHORITY_CONTRACT}"
    if text.endswith(suffix):
        return SystemMessage(content=text.removesuffix(suffix), id=system.id)
    return system


def _clip(message: ToolMessage, tokens: int, keep_tokens: int) -> ToolMessage | None:
    text = message_text(message)
    keep_chars = int(len(text) * keep_tokens / max(1, tokens))
    if keep_chars >= len(text):
        return None
    head = keep_chars * 2 // 3
    tail = keep_chars - head
    clipped = (
        text[:head]
        + _CLIP_NOTE.format(count=len(text) - keep_chars)
        + (text[-tail:] if tail else "")
    )
    return message.model_copy(update={"content": clipped})


def clip_largest(
    messages: list[AnyMessage], excess: int, counter: TokenCounter
) -> tuple[list[AnyMessage], int]:
    """Clip the largest tool results of this view (state keeps them whole) to shed `excess`.

    Returns the new list and the excess left (0 or less when it now fits).
    """
    sizes = {
        i: counter.count_message(m) for i, m in enumerate(messages) if isinstance(m, ToolMessage)
    }
    out = list(messages)
    for index in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if excess <= 0:
            break
        message = out[index]
        tokens = sizes[index]
        if not isinstance(message, ToolMessage) or tokens <= _MIN_CLIP_TOKENS:
            continue
        clipped = _clip(message, tokens, max(_MIN_CLIP_TOKENS, tokens - excess))
        if clipped is None:
            continue
        out[index] = clipped
        excess -= tokens - counter.count_message(clipped)
        logger.warning("clipped tool result %s in this request to fit the window", message.id)
    return out, excess


def head_tokens(messages: Sequence[BaseMessage], lead: int, counter: TokenCounter) -> int:
    """Tokens of the first `lead` messages."""
    return sum(counter.count_message(m) for m in messages[:lead])
