"""Test doubles: scripted, failing and slow chat models, and a hashing embedder.

They are public so applications can test their own foldwise agents offline.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, ClassVar

from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import ConfigDict, Field

from foldwise._local_model import DelayedChatModel, LocalChatModel

# The scripted model lives with replay, which plays recorded sessions back through it; production
# code never imports this module (an import-linter contract in pyproject.toml keeps it so).
from foldwise.replay import RecordedRequest, ScriptedChatModel

__all__ = [
    "FailingChatModel",
    "HashingEmbeddings",
    "RecordedRequest",
    "ScriptedChatModel",
    "SlowChatModel",
]


class FailingChatModel(LocalChatModel):
    """A chat model whose every call raises `error` (default: `RuntimeError`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    llm_type: ClassVar[str] = "foldwise-failing"

    error: Exception = Field(default_factory=lambda: RuntimeError("model unavailable"))
    calls: int = 0

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        self.calls += 1
        raise self.error


class SlowChatModel(DelayedChatModel):
    """A chat model that sleeps `delay_seconds` before answering `content`."""

    llm_type: ClassVar[str] = "foldwise-slow"
    delay_seconds: float = 1.0
    content: str = "done"

    def _reply(self, messages: list[BaseMessage]) -> BaseMessage:
        return AIMessage(content=self.content)


class HashingEmbeddings(Embeddings):
    """Deterministic bag-of-words embeddings by feature hashing; no model, no network.

    Texts that share words get similar vectors, which is enough for retrieval tests.
    """

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions <= 0:
            raise ValueError("dimensions must be positive")
        self.dimensions = dimensions

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for token in text.lower().split():
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimensions
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query."""
        return self._embed(text)
