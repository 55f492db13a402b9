"""Replay recorded agent sessions through foldwise and its peers, and report what happened.

```python
from foldwise.replay import compare_trace, format_summary, write_html_report

comparison = compare_trace("session.jsonl", config=config)   # foldwise + LangChain + ...
print(format_summary(comparison.reports))
write_html_report(comparison.reports, "report.html")
```
"""

from foldwise.replay._api import ReplayComparison, TraceInput, as_trace, compare_trace, replay_trace
from foldwise.replay._demo import DEMO_WINDOW, DemoResult, demo_config, run_demo
from foldwise.replay._driver import DEFAULT_WINDOW, Analyzer, Finished, replay_system
from foldwise.replay._export import ExportFormat, dump_trace
from foldwise.replay._html import render_html_report, write_html_report
from foldwise.replay._model import ProviderAttempt, ReplayChatModel, default_provider_counter
from foldwise.replay._probe import RequestSnapshot
from foldwise.replay._render import format_receipts, format_summary, sparkline, summary_table
from foldwise.replay._report import CallRecord, CompactionEvent, ReplayReport
from foldwise.replay._scripted import RecordedRequest, ScriptedChatModel
from foldwise.replay._systems import DEFAULT_PEERS, SYSTEM_KEYS, ReplaySystem, get_system
from foldwise.replay._trace import TRACE_FORMATS, Trace, TraceFormat, load_trace, parse_trace

__all__ = [
    "DEFAULT_PEERS",
    "DEFAULT_WINDOW",
    "DEMO_WINDOW",
    "SYSTEM_KEYS",
    "TRACE_FORMATS",
    "Analyzer",
    "CallRecord",
    "CompactionEvent",
    "DemoResult",
    "ExportFormat",
    "Finished",
    "ProviderAttempt",
    "RecordedRequest",
    "ReplayChatModel",
    "ReplayComparison",
    "ReplayReport",
    "ReplaySystem",
    "RequestSnapshot",
    "ScriptedChatModel",
    "Trace",
    "TraceFormat",
    "TraceInput",
    "as_trace",
    "compare_trace",
    "default_provider_counter",
    "demo_config",
    "dump_trace",
    "format_receipts",
    "format_summary",
    "get_system",
    "load_trace",
    "parse_trace",
    "render_html_report",
    "replay_system",
    "replay_trace",
    "run_demo",
    "sparkline",
    "summary_table",
    "write_html_report",
]
