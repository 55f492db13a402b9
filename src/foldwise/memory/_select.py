"""Which messages memory extraction reads: the user's own words and the final answers.

Tool calls, tool results, system prompts, summaries, dynamic reminders and hidden framework
messages (the durable data block, which holds recalled memory) are never read: re-extracting
recalled facts is the feedback loop that filled peers' stores with junk (mem0#4573,
deer-flow#3697), and tool output is the easiest place for an injected "memory" to hide.

Evidence ids must be stable across retries of the same slice (the queue replays a slice after
a crash), so a message without an id gets one derived from its role, its text and how many
identical messages came before it in the slice, never a random one. Input messages are not
modified; a message that needs an id is copied.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage

from foldwise.durable import is_durable_data_message
from foldwise.messages import is_real_user_message, message_text

__all__ = ["derived_message_id", "select_messages"]


def derived_message_id(message: BaseMessage, occurrence: int = 0) -> str:
    """A stable id for a message without one: role, text and the occurrence number, hashed."""
    digest = hashlib.sha256(
        f"{message.type}\x00{occurrence}\x00{message_text(message)}".encode()
    ).hexdigest()
    return f"msg-{digest[:20]}"


def _selected(message: BaseMessage) -> bool:
    if is_durable_data_message(message):
        return False
    if is_real_user_message(message):
        return bool(message_text(message).strip())
    if isinstance(message, AIMessage):
        final = not message.tool_calls and not message.invalid_tool_calls
        return final and bool(message_text(message).strip())
    return False


def select_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The user inputs and final assistant answers of `messages`, in order, each with an id.

    Args:
        messages: A conversation slice (state messages, or the span being compacted).

    Returns:
        The selected messages; those without an id are copies carrying `derived_message_id`.
    """
    seen: Counter[tuple[str, str]] = Counter()
    selected: list[BaseMessage] = []
    for message in messages:
        if not _selected(message):
            continue
        key = (message.type, message_text(message))
        occurrence = seen[key]
        seen[key] += 1
        if not message.id:
            message = message.model_copy(update={"id": derived_message_id(message, occurrence)})
        selected.append(message)
    return selected
