"""`ExtractiveSummarizer`: a deterministic, offline chat model that writes structured summaries."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field, field_validator

from foldwise._local_model import LocalChatModel
from foldwise.compaction._prompt_transcript import (
    extract_prompt_sections,
    parse_transcript,
    render_entries,
    transcript_entries,
)
from foldwise.summarizers._budget import fit_summary
from foldwise.summarizers._document import merge_docs, parse_summary
from foldwise.summarizers._extract import extract_doc
from foldwise.summarizers._languages import LANGUAGES
from foldwise.tokens import estimate_tokens

__all__ = ["ExtractiveSummarizer"]

logger = logging.getLogger(__name__)

MAX_INPUT_FRACTION = 0.4
"""A summary is never larger than this share of the text it summarizes."""


class ExtractiveSummarizer(LocalChatModel):
    """A deterministic, offline summarizer: structured sections extracted from the transcript.

    It is foldwise's embedded default (foldwise works with no model at all) and the last-resort
    summarizer when every configured model fails. It reads either a foldwise summarizer prompt
    (the last human message holds `<existing_summary>` / `<new_messages>` blocks) or, used as a
    plain chat model, the messages themselves (system messages ignored), and answers with
    markdown sections: session intent, latest user request, user constraints and corrections,
    decisions, artifacts, errors seen, tool calls made and next steps. Each section is filled
    or says "None"; headings follow the user's language (English and Chinese built in).

    An existing summary is merged section by section (the first session intent survives, lists
    are unions in which the newest items win when the budget bites), never re-summarized. The
    output stays within `max_tokens` and within 40 % of the input, as counted by
    `foldwise.tokens.estimate_tokens`; the same input always gives byte-identical output.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> summarizer = ExtractiveSummarizer()
        >>> reply = summarizer.invoke(
        ...     [
        ...         HumanMessage("Fix the crash in src/app.py. Do not change the public API."),
        ...         AIMessage("I'll add a guard in `load_config` because the file may be empty."),
        ...     ]
        ...     * 5
        ... )
        >>> print(reply.content.splitlines()[0])
        ## Session intent
    """

    llm_type: ClassVar[str] = "foldwise-extractive"
    max_tokens: int = Field(default=1200, gt=0)
    """Upper bound of the summary, in estimated tokens."""
    language: str | None = None
    """Force the headings' language (`en`, `zh`); `None` follows the user's text."""

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        if value is not None and value not in LANGUAGES:
            known = ", ".join(sorted(LANGUAGES))
            raise ValueError(f"language must be one of {known} or null, got {value!r}")
        return value

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "language": self.language}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Accept tools for interface compatibility; the summarizer never calls them."""
        return self.bind(**kwargs)

    def summarize(self, messages: Sequence[BaseMessage], *, max_tokens: int | None = None) -> str:
        """Return the summary text for `messages` (what `invoke` answers, without callbacks).

        Args:
            messages: A foldwise summarizer prompt or any conversation.
            max_tokens: A lower ceiling for this call (the summary's size target); the
                smaller of it and the `max_tokens` field applies.

        Returns:
            The summary markdown.
        """
        previous, transcript = _prompt_sections(messages)
        if transcript is not None:
            entries = parse_transcript(transcript)
            input_text_tokens = estimate_tokens(transcript) + estimate_tokens(previous or "")
        else:
            visible = [m for m in messages if not isinstance(m, SystemMessage)]
            entries = transcript_entries(visible)
            input_text_tokens = estimate_tokens(render_entries(entries))
        doc = extract_doc(entries)
        if previous and previous.strip():
            doc = merge_docs(parse_summary(previous), doc)
        code = self.language or doc.language or "en"
        budget = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        if input_text_tokens > 0:
            budget = min(budget, int(input_text_tokens * MAX_INPUT_FRACTION))
        text = fit_summary(doc, LANGUAGES[code], max(1, budget), count=estimate_tokens)
        logger.debug(
            "extractive summary: %d entries, %d input tokens, budget %d, %d output characters",
            len(entries),
            input_text_tokens,
            budget,
            len(text),
        )
        return text

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> BaseMessage:
        # A per-call `max_tokens` (bound by foldwise to the summary's size target, or passed
        # by any caller as with other chat models) lowers the ceiling for this call.
        ceiling = kwargs.get("max_tokens")
        text = self.summarize(messages, max_tokens=ceiling if isinstance(ceiling, int) else None)
        return AIMessage(content=text, response_metadata={"model_name": "extractive"})


def _prompt_sections(messages: Sequence[BaseMessage]) -> tuple[str | None, str | None]:
    """`(existing_summary, new_messages)` when the last human message is a summarizer prompt."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            text = message.text
            if "<new_messages>" in text and "</new_messages>" in text:
                return extract_prompt_sections(text)
            return None, None
    return None, None
