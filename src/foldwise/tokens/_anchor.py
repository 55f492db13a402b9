"""Usage stamps: what a provider's `input_tokens` measured, so it is trusted only for that.

A response's `usage_metadata.input_tokens` measured the request that produced it. After a
compaction the response can still sit in the kept tail while everything before it changed, so
a count anchored on it would be the pre-compaction size. `TokenCounter.stamp_usage` therefore
records in `response_metadata[USAGE_STAMP_KEY]` a signature of the request's messages; a
count uses the usage only when the messages before the response have that signature.

The signature is a rolling BLAKE2b over each message's id (or, without one, a digest of its
role and content), type and token count, so it is stable across processes (stamps live in
checkpoints) and an edit under the same id that changes the count breaks it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from foldwise.tokens._message import to_json

__all__ = ["EMPTY_PREFIX", "USAGE_STAMP_KEY", "Stamp", "prefix_step", "read_stamp", "usage_total"]

USAGE_STAMP_KEY = "foldwise_usage"
"""Key of the stamp in an `AIMessage.response_metadata` (LangChain never sends it upstream)."""
EMPTY_PREFIX = bytes(16)
"""Signature of an empty list of messages."""


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a response's usage measured: the request's messages and its other tokens."""

    prefix: str
    """Hex signature of the request's messages."""
    n: int
    """Number of messages in the request."""
    static: int
    """Tokens sent besides the messages (system prompt, tool schemas, durable context)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form stored in `response_metadata`."""
        return {"prefix": self.prefix, "n": self.n, "static": self.static}


def usage_total(message: BaseMessage) -> int | None:
    """Return `input_tokens + output_tokens` of an AIMessage's `usage_metadata`, else None."""
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return None
    usage = message.usage_metadata
    input_tokens = usage.get("input_tokens")
    if not isinstance(input_tokens, int) or input_tokens <= 0:
        return None
    output = usage.get("output_tokens")
    return input_tokens + (output if isinstance(output, int) and output > 0 else 0)


def read_stamp(message: BaseMessage) -> Stamp | None:
    """Return the well-formed usage stamp of an AIMessage, else None."""
    if not isinstance(message, AIMessage):
        return None
    raw = message.response_metadata.get(USAGE_STAMP_KEY)
    if not isinstance(raw, dict):
        return None
    prefix, n, static = raw.get("prefix"), raw.get("n"), raw.get("static")
    if not isinstance(prefix, str) or type(n) is not int or type(static) is not int or n < 0:
        return None
    return Stamp(prefix, n, static)


def prefix_step(prefix: bytes, message: BaseMessage, tokens: int) -> bytes:
    """Return the signature of a list whose signature was `prefix` once `message` is appended.

    Args:
        prefix: Signature of the messages before `message`.
        message: The appended message.
        tokens: Its count by the counter that signs (an edit that changes it breaks the chain).
    """
    ident = message.id
    if ident is None:
        # No id: identify the message by a digest of what it says (rare: states assign ids).
        content = message.content
        text = content if isinstance(content, str) else to_json(content)
        digest = hashlib.blake2b(digest_size=16)
        for part in (message.name or "", getattr(message, "tool_call_id", None) or "", text):
            digest.update(f"{len(part)}:".encode())
            digest.update(part.encode("utf-8", "surrogatepass"))
        ident = "~" + digest.hexdigest()
    part = f"{message.type}:{len(ident)}:{ident}:{tokens}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(prefix + part, digest_size=16).digest()
