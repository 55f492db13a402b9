"""Offload: oversized tool output and pasted input stored verbatim, previewed, readable on demand.

```python
from foldwise.offload import FilesystemArtifactStore, make_preview, offload_tools

store = FilesystemArtifactStore(".foldwise/artifacts")
ref = store.put("thread-1", big_text, source="search_corpus", kind="tool")
page = store.read_page("thread-1", ref.artifact_id, offset=0, limit=200)
tools = offload_tools(store)          # read_offloaded, search_offloaded
```

The agent-facing piece is `foldwise.middleware.tool_output_offload.ToolOutputOffloadMiddleware`.
"""

from foldwise._thread_id import resolve_thread_id
from foldwise.messages import split_content
from foldwise.offload import _models
from foldwise.offload._blocking import BlockingArtifactStore
from foldwise.offload._factory import (
    acollect_garbage,
    artifact_store_from_config,
    collect_garbage,
)
from foldwise.offload._filesystem import FilesystemArtifactStore
from foldwise.offload._ids import (
    ARTIFACT_ID_PATTERN,
    is_artifact_id,
    make_artifact_id,
    thread_key,
    validate_artifact_id,
)
from foldwise.offload._langgraph_store import StoreArtifactStore
from foldwise.offload._models import *  # noqa: F403 - the names in `_models.__all__`
from foldwise.offload._notice import (
    CLIPPED_FLAG,
    clipped_text,
    human_notice,
    offloaded_text,
    replace_message_text,
    tool_notice,
)
from foldwise.offload._preview import make_preview, one_line_preview
from foldwise.offload._reducer import MAX_OFFLOAD_EVENTS, merge_offloads
from foldwise.offload._rows import MAX_ROW_CHARS, iter_rows, join_rows
from foldwise.offload._search import check_pattern
from foldwise.offload._store import DEFAULT_PAGE_CHARS, ArtifactStore, BaseArtifactStore
from foldwise.offload._tools import (
    NO_THREAD_ID,
    READ_TOOL_NAME,
    SEARCH_TOOL_NAME,
    format_page,
    format_search,
    offload_tools,
)

__all__ = [
    "ARTIFACT_ID_PATTERN",
    "CLIPPED_FLAG",
    "DEFAULT_PAGE_CHARS",
    "MAX_OFFLOAD_EVENTS",
    "MAX_ROW_CHARS",
    "NO_THREAD_ID",
    "READ_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "ArtifactStore",
    "BaseArtifactStore",
    "BlockingArtifactStore",
    "FilesystemArtifactStore",
    "StoreArtifactStore",
    "acollect_garbage",
    "artifact_store_from_config",
    "check_pattern",
    "clipped_text",
    "collect_garbage",
    "format_page",
    "format_search",
    "human_notice",
    "is_artifact_id",
    "iter_rows",
    "join_rows",
    "make_artifact_id",
    "make_preview",
    "merge_offloads",
    "offload_tools",
    "offloaded_text",
    "one_line_preview",
    "replace_message_text",
    "resolve_thread_id",
    "split_content",
    "thread_key",
    "tool_notice",
    "validate_artifact_id",
]
__all__ += _models.__all__  # the value objects
