"""SDK conformance harness: both official LangGraph clients against `foldwise serve`."""

from __future__ import annotations

__all__: list[str] = []
