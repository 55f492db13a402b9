"""Tools the end-to-end gateway tests load from config (`tools: - use: module:attr`)."""

from __future__ import annotations

from langchain_core.tools import tool

__all__ = ["RETRIEVAL_CHARS", "lookup_term", "retrieve_documents"]

RETRIEVAL_CHARS = 47_000
"""Size of one `retrieve_documents` result: SourceLens's oversized retrieval."""


@tool
def retrieve_documents(query: str) -> str:
    """Retrieve passages from the document corpus for a query."""
    passage = "retrieved passage about data retention policies and citation rules. "
    body = (passage * (RETRIEVAL_CHARS // len(passage) + 1))[: RETRIEVAL_CHARS - len(query) - 3]
    return f"[{query}] {body}"


@tool
def lookup_term(term: str) -> str:
    """Look up the definition of a term."""
    return f"{term}: to fold is to bend something over on itself."
