"""LangChain v1 agent middleware, one class per module."""

from foldwise.middleware.durable_context import DurableContextMiddleware
from foldwise.middleware.summarization import SummarizationMiddleware, is_context_overflow

__all__ = ["DurableContextMiddleware", "SummarizationMiddleware", "is_context_overflow"]
