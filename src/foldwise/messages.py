"""Message conventions shared by every foldwise component.

Flags live in `additional_kwargs` so they survive serialization and checkpoints:

- `hide_from_ui`: framework messages (durable data block) that UIs and transcripts skip.
- `durable_context_data`: the hidden data message rendered by `DurableContextMiddleware`.
- `dynamic_context_reminder`: reminders rescued by id across compaction.
- `foldwise_offload`: set on a message whose content was replaced by a preview; holds the
  artifact reference (`artifact_id`, `chars`, `tokens`, `source`).
"""

from __future__ import annotations

__all__ = [
    "DURABLE_DATA_FLAG",
    "DYNAMIC_REMINDER_FLAG",
    "HIDE_FROM_UI_FLAG",
    "OFFLOAD_FLAG",
    "SUMMARY_MESSAGE_NAME",
]

HIDE_FROM_UI_FLAG = "hide_from_ui"
DURABLE_DATA_FLAG = "durable_context_data"
DYNAMIC_REMINDER_FLAG = "dynamic_context_reminder"
OFFLOAD_FLAG = "foldwise_offload"
SUMMARY_MESSAGE_NAME = "summary"
