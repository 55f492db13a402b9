"""Summarizers that need no model: `ExtractiveSummarizer`, deterministic and offline.

```python
from foldwise.summarizers import ExtractiveSummarizer

summary = ExtractiveSummarizer(max_tokens=800).invoke(messages).content
```
"""

from foldwise.summarizers._extractive import MAX_INPUT_FRACTION, ExtractiveSummarizer
from foldwise.summarizers._languages import LANGUAGES, SummaryLanguage

__all__ = [
    "LANGUAGES",
    "MAX_INPUT_FRACTION",
    "ExtractiveSummarizer",
    "SummaryLanguage",
]
