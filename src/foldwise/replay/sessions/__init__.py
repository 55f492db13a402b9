"""Example sessions written for foldwise, generated deterministically (nothing large is stored).

- `proposal_review`: a pasted 8,300-character Chinese proposal checked against the workspace
  documents; retrievals of about 47,000 characters each (seed 001's story).
- `corpus_timeline`: a dated timeline over a large invented corpus; 24 searches of about
  47,000 characters, running notes, two user follow-ups.
- `coding_zh`: a Chinese-language coding session: reads, greps, edits, test runs, and a large
  log dump.

```python
from foldwise.replay.sessions import SESSION_NAMES, session_trace

trace = session_trace("corpus_timeline")      # a foldwise.replay.Trace
```
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import BaseMessage

from foldwise.replay._trace import Trace
from foldwise.replay.sessions._coding_zh import build_coding_zh
from foldwise.replay.sessions._proposal import build_proposal_review, proposal_text
from foldwise.replay.sessions._timeline import build_corpus_timeline

__all__ = ["SESSION_NAMES", "SESSION_TITLES", "proposal_text", "session_messages", "session_trace"]

_BUILDERS: dict[str, Callable[..., list[BaseMessage]]] = {
    "proposal_review": build_proposal_review,
    "corpus_timeline": build_corpus_timeline,
    "coding_zh": build_coding_zh,
}
SESSION_NAMES: tuple[str, ...] = tuple(_BUILDERS)
"""The example sessions, in demo order."""
SESSION_TITLES: dict[str, str] = {
    "proposal_review": "Pasted proposal review (zh, 8,300-char paste, 47k-char retrievals)",
    "corpus_timeline": "Timeline over a big corpus (en, 24 retrievals of 47k chars)",
    "coding_zh": "Chinese coding session (reads, tests, edits, a 90k-char log)",
}
"""One line per session for reports."""


def session_messages(name: str, *, quick: bool = False) -> list[BaseMessage]:
    """The messages of session `name` (`quick`: smaller tool outputs).

    Raises:
        KeyError: Unknown session name.
    """
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown session {name!r}; known: {', '.join(SESSION_NAMES)}") from None
    return builder(quick=quick)


def session_trace(name: str, *, quick: bool = False) -> Trace:
    """Session `name` as a `foldwise.replay.Trace` named after it."""
    return Trace.from_messages(session_messages(name, quick=quick), name=name)
