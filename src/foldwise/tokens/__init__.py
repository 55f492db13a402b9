"""Token counting: a script-aware estimate, exact offline tokenizers, caching and usage anchoring.

```python
from foldwise.tokens import estimate_tokens, get_counter

estimate_tokens("你好，世界")            # CJK-aware, never chars/4
counter = get_counter("o200k_base")     # or a ModelConfig / configured model name
counter.count_messages(messages)        # cached, incremental, anchored on stamped usage
```
"""

from foldwise.tokens._anchor import USAGE_STAMP_KEY
from foldwise.tokens._cache import CACHE_BYTES_LIMIT, CACHE_LIMIT
from foldwise.tokens._counter import RequestCount, TokenCounter
from foldwise.tokens._estimate import estimate_tokens
from foldwise.tokens._exact import EXACT_TOKENIZERS, exact_backend
from foldwise.tokens._message import IMAGE_TOKENS, MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD
from foldwise.tokens._registry import ESTIMATE, get_counter

__all__ = [
    "CACHE_BYTES_LIMIT",
    "CACHE_LIMIT",
    "ESTIMATE",
    "EXACT_TOKENIZERS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "USAGE_STAMP_KEY",
    "RequestCount",
    "TokenCounter",
    "estimate_tokens",
    "exact_backend",
    "get_counter",
]
