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
from typing import Any, cast

from langchain.agents import AgentState
from langchain.agents.middleware import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from foldwise.compaction import CompactionOutcome
from foldwise.durable import AUTHORITY_CONTRACT, is_durable_data_message
from foldwise.errors import ModelResponseError
from foldwise.messages import is_cut_off_answer, message_text
from foldwise.tokens import TokenCounter

__all__ = [
    "check_complete",
    "clip_largest",
    "compacted_request",
    "is_context_overflow",
    "measure",
    "overflow_numbers",
    "profile_window",
    "run_id",
    "split_head",
    "strip_contract",
    "with_commit",
]


def profile_window(model: BaseChatModel) -> int | None:
    """The model's LangChain profile `max_input_tokens`, when it declares one."""
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def run_id() -> str | None:
    """The current run's id, when the caller put one in the config (the gateway does)."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    value = (config.get("metadata") or {}).get("run_id") or config.get("run_id")
    return str(value) if value else None


logger = logging.getLogger(__name__)


_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context limit",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceeds the maximum number of tokens",
)
_N = r"(\d[\d,]*)"
# (pattern, group of the window, group of the request's input tokens), most specific first.
_NUMBERS: tuple[tuple[re.Pattern[str], int, int], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), window, request)
    for pattern, window, request in (
        # Anthropic: "input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000"
        (rf"{_N}\s*\+\s*{_N}\s*>\s*{_N}", 3, 1),
        # OpenAI: "maximum context length is 16385 tokens. However, you requested 17000 tokens
        # (15000 in the messages, 2000 in the completion)"
        (rf"maximum context length is {_N}.*?\({_N} in the messages", 1, 2),
        # OpenAI / vLLM: "... However, your messages resulted in 9,731 tokens" / "your request
        # has 30000 input tokens"
        (rf"maximum context length is {_N}.*?(?:resulted in|has|requested) {_N}", 1, 2),
        # OpenAI (current models): "Input tokens exceed the configured limit of 272000 tokens.
        # Your messages resulted in 272500 tokens."
        (rf"limit of {_N} tokens.*?(?:resulted in|has|requested) {_N}", 1, 2),
        # Gemini: "The input token count (1196265) exceeds the maximum number of tokens allowed
        # (1048575)"
        (rf"token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)", 2, 1),
        # Anthropic (older): "prompt is too long: 210000 tokens > 200000 maximum"
        (rf"{_N} tokens? > {_N}", 2, 1),
        # "12000 input tokens exceed the 4000-token window"
        (rf"{_N} (?:input )?tokens? exceeds? the {_N}[- ]token", 2, 1),
    )
)
_CLIP_NOTE = "\n[… {count:,} characters clipped from this view to fit the context window …]\n"
_MIN_CLIP_TOKENS = 200


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
    """The provider's window and its count of the refused request's input, when it says them.

    Reads the messages of OpenAI, Anthropic, Gemini, vLLM and LangChain's own overflow errors;
    `(None, None)` when no known form matches (the caller then assumes a fixed shrink).
    """
    text = str(error)
    for pattern, window_group, request_group in _NUMBERS:
        match = pattern.search(text)
        if match:
            return _number(match.group(window_group)), _number(match.group(request_group))
    return None, None


def check_complete(response: Any, thread_id: str) -> None:
    """Raise if the model's answer (a message or a `ModelResponse`) was cut off mid-way.

    Raises:
        ModelResponseError: The answer ended without its end marker (a dropped stream).
    """
    results = response.result if isinstance(response, ModelResponse) else [response]
    if any(is_cut_off_answer(message) for message in results):
        raise ModelResponseError(
            f"the model's answer was cut off before it finished (thread {thread_id}: no finish "
            "reason; the provider's stream or connection dropped); none of it was kept, retry "
            "the run"
        )


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


def measure(request: ModelRequest[Any], counter: TokenCounter) -> tuple[int, int, int]:
    """Tokens of the fixed part and of the conversation, and where the conversation starts.

    The fixed part (system prompt, tool schemas, contract and data block) sits at the head of
    the request: only the first few positions are looked at.
    """
    messages = request.messages
    lead = split_head(messages)
    static = counter.count_tools(request.tools) + head_tokens(messages, lead, counter)
    if request.system_message is not None:
        static += counter.count_message(request.system_message)
    conversation = counter.count_messages(messages[lead:] if lead else messages, anchor=False)
    return static, conversation, lead


def compacted_request(request: ModelRequest[Any], outcome: CompactionOutcome) -> ModelRequest[Any]:
    """`request` rebuilt on a compaction's state, without its old contract and data block."""
    state: dict[str, Any] = {
        **request.state,
        "summary_text": outcome.summary_text,
        "messages": list(outcome.preserved),
    }
    if outcome.offload_refs:
        state["offloads"] = [*(state.get("offloads") or []), *outcome.offload_refs]
    lead = split_head(request.messages)
    keep_head = [
        m
        for m in request.messages[:lead]
        if isinstance(m, SystemMessage) and m.text != AUTHORITY_CONTRACT
    ]
    return request.override(
        messages=[*keep_head, *cast(list[AnyMessage], list(outcome.preserved))],
        system_message=strip_contract(request.system_message),
        state=cast(AgentState[Any], state),
    )


def with_commit(
    response: ModelResponse[Any] | AIMessage, outcome: CompactionOutcome
) -> ExtendedModelResponse[Any]:
    """The response plus the compaction's state write, for a compaction made mid-call."""
    update = outcome.state_update() or {}
    result = response if isinstance(response, ModelResponse) else ModelResponse(result=[response])
    # The compaction write re-adds the response after the preserved messages, because the
    # remove-all in it would otherwise drop the model's own answer of this step.
    update["messages"] = [*update.get("messages", []), *result.result]
    return ExtendedModelResponse(model_response=result, command=Command(update=update))
