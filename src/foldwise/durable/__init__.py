"""Durable context: channels that survive compaction, rendered as data behind a contract."""

from foldwise.durable._channels import (
    BUILTIN_CHANNELS,
    DurableChannel,
    escape_value,
    render_offloads,
    render_sections,
)
from foldwise.durable._condense import condense_summary
from foldwise.durable._delegations import (
    MAX_DELEGATIONS,
    TERMINAL_STATUSES,
    extract_delegations,
    merge_delegations,
    render_delegations,
)
from foldwise.durable._render import (
    AUTHORITY_CONTRACT,
    DATA_CLOSE,
    DATA_OPEN,
    INVISIBLE_CONTROLS,
    LOOKALIKE_BRACKETS,
    SUMMARY_RENDER_CAP_CHARS,
    bound_text,
    escape_data,
    inject_durable_context,
    inject_recall,
    is_durable_data_message,
    place_recall,
    render_section,
    render_summary_section,
    summary_for_context,
)
from foldwise.durable._skills import (
    MAX_SKILLS,
    extract_skills,
    merge_skill_context,
    render_skills,
)

__all__ = [
    "AUTHORITY_CONTRACT",
    "BUILTIN_CHANNELS",
    "DATA_CLOSE",
    "DATA_OPEN",
    "INVISIBLE_CONTROLS",
    "LOOKALIKE_BRACKETS",
    "MAX_DELEGATIONS",
    "MAX_SKILLS",
    "SUMMARY_RENDER_CAP_CHARS",
    "TERMINAL_STATUSES",
    "DurableChannel",
    "bound_text",
    "condense_summary",
    "escape_data",
    "escape_value",
    "extract_delegations",
    "extract_skills",
    "inject_durable_context",
    "inject_recall",
    "is_durable_data_message",
    "merge_delegations",
    "merge_skill_context",
    "place_recall",
    "render_delegations",
    "render_offloads",
    "render_section",
    "render_sections",
    "render_skills",
    "render_summary_section",
    "summary_for_context",
]
