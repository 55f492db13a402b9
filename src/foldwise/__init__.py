"""foldwise: keep long-running LangChain / LangGraph agents inside their context window.

```python
import foldwise

config = foldwise.load_config("foldwise.yaml")
agent = foldwise.create_agent(config, tools=[...], checkpointer=...)
receipt = await foldwise.acompact_thread(agent, {"configurable": {"thread_id": "t1"}})
```
"""

from foldwise._manual import (
    acompact_thread,
    acompact_thread_outcome,
    compact_thread,
    compact_thread_outcome,
)
from foldwise.agent import build_middlewares, create_agent
from foldwise.compaction import (
    CompactionPlan,
    CompactionPolicy,
    CompactionReceipt,
    plan_compaction,
)
from foldwise.config import ContextSize, FoldwiseConfig, load_config
from foldwise.errors import (
    ArtifactIdError,
    ArtifactNotFoundError,
    CompactionDisabledError,
    ConfigError,
    FoldwiseError,
    FoldwiseRuntimeError,
    MessageFormatError,
    ModelConstructionError,
    StorageError,
    SummaryGenerationError,
    ThreadBusyError,
    ThreadNotFoundError,
    TraceFormatError,
    UsageError,
)
from foldwise.middleware import (
    DurableContextMiddleware,
    MemoryMiddleware,
    SummarizationMiddleware,
    ToolOutputOffloadMiddleware,
)
from foldwise.state import FoldwiseState

__version__ = "0.1.0"

__all__ = [
    "ArtifactIdError",
    "ArtifactNotFoundError",
    "CompactionDisabledError",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionReceipt",
    "ConfigError",
    "ContextSize",
    "DurableContextMiddleware",
    "FoldwiseConfig",
    "FoldwiseError",
    "FoldwiseRuntimeError",
    "FoldwiseState",
    "MemoryMiddleware",
    "MessageFormatError",
    "ModelConstructionError",
    "StorageError",
    "SummarizationMiddleware",
    "SummaryGenerationError",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "ToolOutputOffloadMiddleware",
    "TraceFormatError",
    "UsageError",
    "__version__",
    "acompact_thread",
    "acompact_thread_outcome",
    "build_middlewares",
    "compact_thread",
    "compact_thread_outcome",
    "create_agent",
    "load_config",
    "plan_compaction",
]
