"""Compaction engine: a pure planner, the summarizer prompt, candidates, receipts."""

from foldwise.compaction._engine import Compactor
from foldwise.compaction._outcome import CompactionOutcome, CompactOptions, SummarizationEvent
from foldwise.compaction._planner import (
    CompactionDecision,
    CompactionPlan,
    SkipReason,
    decide_compaction,
    plan_compaction,
)
from foldwise.compaction._policy import CompactionPolicy, Threshold
from foldwise.compaction._presummary import Presummaries, presummary_due
from foldwise.compaction._prompt import (
    DEFAULT_SUMMARY_PROMPT,
    build_summary_input,
    build_summary_prompt,
)
from foldwise.compaction._receipt import (
    MAX_RECEIPTS,
    CompactionReceipt,
    SummaryAttempt,
    append_receipts,
)
from foldwise.compaction._summarize import SUMMARIZE_TAGS, candidate_names, validate_summary

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MAX_RECEIPTS",
    "SUMMARIZE_TAGS",
    "CompactOptions",
    "CompactionDecision",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionReceipt",
    "Compactor",
    "Presummaries",
    "SkipReason",
    "SummarizationEvent",
    "SummaryAttempt",
    "Threshold",
    "append_receipts",
    "build_summary_input",
    "build_summary_prompt",
    "candidate_names",
    "decide_compaction",
    "plan_compaction",
    "presummary_due",
    "validate_summary",
]
