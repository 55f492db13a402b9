"""LangChain v1 agent middleware, one class per module."""

from foldwise.middleware.durable_context import DurableContextMiddleware
from foldwise.middleware.memory import MemoryMiddleware
from foldwise.middleware.summarization import SummarizationMiddleware, is_context_overflow
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware

__all__ = [
    "DurableContextMiddleware",
    "MemoryMiddleware",
    "SummarizationMiddleware",
    "ToolOutputOffloadMiddleware",
    "is_context_overflow",
]
