"""The crash campaign's model and tool: a stub brain, a large-output tool, the server config.

`fetch_report` returns ~8,000 characters (offloaded: the configured `tool_token_limit` is far
below), `brain` answers the OpenAI stub's requests (a summary to the summarizer, a tool call to
``report ...`` messages, a short answer otherwise, after a short delay so a random-time kill can
land inside a model call), and `server_config` writes the `foldwise.yaml` every crash server
runs: a small window (compaction and offload happen), memory on, a short lease TTL.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from foldwise.bench._openai_stub import content_text
from foldwise.bench._serve import stub_model_entry, write_config

__all__ = ["LEASE_TTL", "REPORT_CHARS", "SUMMARY", "brain", "fetch_report", "server_config"]

REPORT_CHARS = 8000
SUMMARY = "SUMMARY: the user shared facts and asked for reports; all were answered."
LEASE_TTL = 1.5
"""`gateway.lease_ttl_seconds` of the crash servers: a dead worker's threads free after it."""
_DELAY = 0.03


@tool
def fetch_report(name: str) -> str:
    """Fetch a named quarterly report (long text)."""
    line = f"report {name}: revenue, churn and retention figures by region and month. "
    return (line * (REPORT_CHARS // len(line) + 1))[:REPORT_CHARS]


def brain(body: Mapping[str, Any]) -> dict[str, Any]:
    """The stub model's answer to one request `body`."""
    messages = list(body.get("messages") or [])
    if messages and "<new_messages>" in content_text(messages[0].get("content")):
        return {"content": SUMMARY, "delay": _DELAY}
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"content": "Read the report; figures noted.", "delay": _DELAY}
    text = content_text(last.get("content"))
    if text.startswith("report "):
        name = text.split()[1]
        return {
            "tool_calls": [{"name": "fetch_report", "arguments": {"name": name}}],
            "delay": _DELAY,
        }
    return {"content": f"Noted: {text[:40]}", "delay": _DELAY}


def server_config(directory: Path, stub_url: str, storage_url: str) -> Path:
    """Write the crash servers' `foldwise.yaml` into `directory`; return its path."""
    config = {
        "models": [stub_model_entry(stub_url, context_window=12000)],
        "tools": [{"use": "foldwise.bench._rel_crash_tools:fetch_report"}],
        "summarization": {
            "trigger": {"type": "tokens", "value": 2500},
            "keep": {"type": "tokens", "value": 800},
            "min_gain_tokens": 0,
            "reserved_output_tokens": 512,
        },
        "offload": {"tool_token_limit": 1000, "preview_chars": 300, "root": "artifacts"},
        "storage": {"url": storage_url},
        "memory": {"enabled": True, "debounce_seconds": 0},
        "gateway": {"lease_ttl_seconds": LEASE_TTL},
    }
    return write_config(directory, config)
