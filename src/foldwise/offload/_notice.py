"""What the model sees instead of an oversized text: a notice naming the artifact, and a preview.

These helpers are pure: they build the replacement message from the original and a reference
(or, when the store failed, from the size alone). The message keeps its id, `tool_call_id`,
name, status and non-text content blocks; only the text changes, and a flag in
`additional_kwargs` records what happened.
"""

from __future__ import annotations

from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from foldwise.messages import OFFLOAD_FLAG, split_content
from foldwise.offload._models import ArtifactRef
from foldwise.offload._preview import make_preview
from foldwise.offload._tools import READ_TOOL_NAME, SEARCH_TOOL_NAME

__all__ = [
    "CLIPPED_FLAG",
    "clipped_text",
    "human_notice",
    "offloaded_text",
    "replace_message_text",
    "tool_notice",
]

CLIPPED_FLAG = "foldwise_clipped"
"""`additional_kwargs` key set when a text was clipped inline because it could not be stored."""

_RULE = "\n----\n"
M = TypeVar("M", bound=BaseMessage)


def _how_to_read(artifact_id: str) -> str:
    return (
        f'Read any part with {READ_TOOL_NAME}("{artifact_id}", offset=0) (pages of numbered '
        f'rows) or find lines with {SEARCH_TOOL_NAME}("{artifact_id}", pattern="...").'
    )


def _notice(ref: ArtifactRef, subject: str, stored: str) -> str:
    size = f"({ref.chars:,} characters, ~{ref.tokens:,} tokens, {ref.lines:,} lines)"
    return (
        f"[foldwise offload] {subject} {size} {stored} only its beginning and end are shown "
        "below. " + _how_to_read(ref.artifact_id)
    )


def tool_notice(ref: ArtifactRef) -> str:
    """The reference block placed above the preview of an offloaded tool result."""
    subject = f"The full output of tool `{ref.source}`"
    return _notice(ref, subject, f"was stored as artifact {ref.artifact_id};")


def human_notice(ref: ArtifactRef) -> str:
    """The reference block placed above the preview of an offloaded user message."""
    stored = (
        f"was too long to include in full; it was stored verbatim as artifact {ref.artifact_id} and"
    )
    return _notice(ref, "This user message", stored)


def offloaded_text(text: str, ref: ArtifactRef, *, preview_chars: int) -> str:
    """Notice plus preview for a stored text."""
    notice = tool_notice(ref) if ref.kind == "tool" else human_notice(ref)
    return notice + _RULE + make_preview(text, max_chars=preview_chars)


def clipped_text(text: str, *, source: str, tokens: int, preview_chars: int) -> str:
    """Notice plus preview for a text that could not be stored (nothing to read back)."""
    notice = (
        f"[foldwise] The output of `{source}` was {len(text):,} characters (~{tokens:,} tokens) "
        "and could not be stored, so only its beginning and end are shown below; the middle is "
        "not recoverable. If you need it, repeat the request in smaller parts."
    )
    return notice + _RULE + make_preview(text, max_chars=preview_chars)


def replace_message_text(
    message: M, new_text: str, *, flag: str = OFFLOAD_FLAG, flag_value: dict[str, Any]
) -> M:
    """A copy of `message` whose text is `new_text`, with `additional_kwargs[flag]` set.

    The id, name, `tool_call_id`, status, artifact and response metadata are kept; non-text
    content blocks are kept after the new text.
    """
    _, others = split_content(message.content)
    content: str | list[Any] = (
        new_text if not others else [{"type": "text", "text": new_text}, *others]
    )
    kwargs = {**message.additional_kwargs, flag: flag_value}
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})
