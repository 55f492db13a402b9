"""The effective settings of a configuration, as data (for `--json`) and as a rich renderable."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from foldwise.compaction import CompactionPolicy, candidate_names
from foldwise.config import BUILTIN_EXTRACTIVE, ContextSize, FoldwiseConfig

__all__ = ["mask_url", "render_summary", "summarize_config"]

_NO_WINDOW = "the run model has no context_window"


def mask_url(url: str) -> str:
    """Hide the password of a storage URL (`postgresql://user:***@host/db`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _size(clause: ContextSize) -> dict[str, Any]:
    return {"type": clause.type, "value": clause.value}


def _triggers(config: FoldwiseConfig, policy: CompactionPolicy) -> list[dict[str, Any]]:
    resolved = {id(t.source): t for t in policy.triggers}
    out: list[dict[str, Any]] = []
    for clause in config.summarization.trigger or []:
        threshold = resolved.get(id(clause))
        entry = _size(clause)
        if threshold is None:
            entry.update(status="dropped", limit=None, unit=None, reason=_NO_WINDOW)
        else:
            unit = "messages" if clause.type == "messages" else "tokens"
            entry.update(status="active", limit=threshold.limit, unit=unit)
        out.append(entry)
    return out


def _automatic(config: FoldwiseConfig, triggers: list[dict[str, Any]]) -> str:
    settings = config.summarization
    if not settings.enabled:
        return "disabled"
    if settings.trigger is None:
        return "never (trigger: null)"
    if not any(t["status"] == "active" for t in triggers):
        return "never (no usable trigger clause)"
    return "on"


def _summarization(config: FoldwiseConfig) -> dict[str, Any]:
    """The `summarization` section, resolved against the run model."""
    run = config.model()
    policy = CompactionPolicy.from_config(config)
    settings = config.summarization
    triggers = _triggers(config, policy)
    keep = policy.keep
    return {
        "enabled": settings.enabled,
        "automatic": _automatic(config, triggers),
        "triggers": triggers,
        "keep": {
            **_size(keep),
            "tokens": policy.keep_tokens() if keep.type == "fraction" else None,
            "configured": _size(settings.keep),
            "fell_back": keep != settings.keep,
        },
        "trim_tokens_to_summarize": settings.trim_tokens_to_summarize,
        "summarizers": candidate_names(
            configured=settings.model_name,
            run_model=run.name if run else None,
            fallback=settings.fallback,
        ),
        "fallback": settings.fallback,
        "summary_prompt": "default" if settings.summary_prompt is None else "custom",
        "timeout_seconds": settings.timeout_seconds,
        "preserve_human": settings.preserve_human.model_dump(),
        "budget": {
            "context_window": policy.context_window,
            "reserved_output_tokens": policy.reserved_output_tokens,
            "limit": policy.budget_limit,
        },
        "anti_thrash": {
            "min_gain_tokens": settings.min_gain_tokens,
            "max_compactions_per_run": settings.max_compactions_per_run,
            "fallback_after_failures": settings.fallback_after_failures,
        },
        "skill_file_read_tool_names": list(settings.skill_file_read_tool_names),
    }


def summarize_config(config: FoldwiseConfig, *, path: str | None) -> dict[str, Any]:
    """Return the effective settings of `config` as JSON-ready data.

    Triggers, keep and the budget are resolved against the run model (the first configured
    model), exactly as `CompactionPolicy.from_config` resolves them for an agent; fraction
    clauses that cannot be resolved are reported as dropped.

    Args:
        config: The loaded configuration.
        path: The file it came from, or `None` for the built-in defaults.
    """
    run = config.model()
    return {
        "path": path,
        "run_model": run.name if run else None,
        "models": [
            {
                "name": m.name,
                "class": m.use,
                "model": m.options.get("model"),
                "context_window": m.context_window,
                "tokenizer": m.tokenizer or "estimate",
            }
            for m in config.models
        ],
        "summarization": _summarization(config),
        "offload": config.offload.model_dump(),
        "tools": [t.use for t in config.tools],
        "skills": config.skills.model_dump(),
        "storage": {"url": mask_url(config.storage.url), "scheme": config.storage.scheme},
        "gateway": config.gateway.model_dump(),
        "memory": config.memory.model_dump(),
    }


def _n(value: int | float | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,}"
    return f"{int(value):,}"


def _bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def _limit(what: str, tokens: int) -> str:
    return f"{what} off (0)" if tokens == 0 else f"{what} > {_n(tokens)} tokens"


def _clause(entry: dict[str, Any]) -> str:
    if entry["type"] == "fraction":
        return f"fraction {entry['value']:.0%}"
    return f"{entry['type']} {_n(entry['value'])}"


def _trigger_lines(data: dict[str, Any]) -> Text:
    text = Text()
    triggers = data["triggers"]
    if not triggers:
        text.append("none (automatic compaction never fires)", style="yellow")
    for i, entry in enumerate(triggers):
        if i:
            text.append("\n")
        if entry["status"] == "dropped":
            text.append(f"{_clause(entry)}: dropped ({entry['reason']})", style="yellow")
        elif entry["type"] == "fraction":
            text.append(f"{_clause(entry)} → ≥ {_n(entry['limit'])} tokens")
        else:
            text.append(f"≥ {_n(entry['limit'])} {entry['unit']}")
    if len(triggers) > 1:
        text.append("\n(any clause fires)", style="dim")
    return text


def _keep_line(keep: dict[str, Any]) -> Text:
    if keep["type"] == "fraction":
        text = Text(f"{keep['value']:.0%} of window = {_n(keep['tokens'])} tokens")
    else:
        text = Text(f"{_n(keep['value'])} {keep['type']}")
    if keep["fell_back"]:
        configured = keep["configured"]
        text.append(
            f" (default; fraction {configured['value']:.0%} dropped: {_NO_WINDOW})", style="yellow"
        )
    return text


def _grid(title: str | None, rows: list[tuple[str, str | Text]]) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        show_header=False,
        box=None,
        padding=(0, 1),
        expand=False,
    )
    table.add_column(style="cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value if isinstance(value, Text) else Text(value))
    return table


def _models_table(data: dict[str, Any]) -> Table:
    table = Table(
        title="Models",
        title_justify="left",
        title_style="bold",
        box=None,
        padding=(0, 1),
        header_style="dim",
    )
    for column in ("name", "class", "model", "window", "tokenizer"):
        table.add_column(column, overflow="fold")
    for m in data["models"]:
        name = Text(m["name"])
        if m["name"] == data["run_model"]:
            name.append(" (run)", style="green")
        table.add_row(
            name,
            Text(m["class"]),
            Text(str(m["model"] or "—")),
            _n(m["context_window"]),
            Text(m["tokenizer"]),
        )
    table.add_row(
        Text(BUILTIN_EXTRACTIVE, style="dim"),
        Text("built-in, offline", style="dim"),
        "—",
        "—",
        Text("estimate", style="dim"),
    )
    return table


def _budget_line(budget: dict[str, Any]) -> Text:
    if budget["limit"] is None:
        return Text(f"unknown ({_NO_WINDOW})", style="yellow")
    return Text(
        f"{_n(budget['context_window'])} − {_n(budget['reserved_output_tokens'])} reserved"
        f" = {_n(budget['limit'])} tokens per request"
    )


def _anti_thrash_line(s: dict[str, Any]) -> str:
    anti = s["anti_thrash"]
    line = (
        f"min gain {_n(anti['min_gain_tokens'])} tokens; "
        f"at most {anti['max_compactions_per_run']} compactions per run"
    )
    if s["fallback"]:
        line += f"; straight to {s['fallback']} after {anti['fallback_after_failures']} failures"
    return line


def _summarization_grid(s: dict[str, Any]) -> Table:
    human = s["preserve_human"]
    trim = s["trim_tokens_to_summarize"]
    return _grid(
        "Summarization",
        [
            (
                "automatic",
                Text(s["automatic"], style="green" if s["automatic"] == "on" else "yellow"),
            ),
            ("triggers", _trigger_lines(s)),
            ("keep", _keep_line(s["keep"])),
            ("trim input to", "disabled (null)" if trim is None else f"{_n(trim)} tokens"),
            ("summarizers", " → ".join(s["summarizers"]) or "none"),
            ("summary prompt", f"{s['summary_prompt']}; timeout {_n(s['timeout_seconds'])} s"),
            ("preserve human", f"{human['mode']}, up to {_n(human['max_tokens'])} tokens"),
            ("budget", _budget_line(s["budget"])),
            ("anti-thrash", _anti_thrash_line(s)),
            (
                "skill reads",
                ", ".join(s["skill_file_read_tool_names"]) or "none (skill capture off)",
            ),
        ],
    )


def _rest_grid(data: dict[str, Any]) -> Table:
    off = data["offload"]
    limits = f"{_limit('tool results', off['tool_token_limit'])}, " + _limit(
        "user input", off["human_token_limit"]
    )
    age = off["max_age_days"]
    gateway = data["gateway"]
    return _grid(
        "Offload, storage, gateway",
        [
            ("offload", limits if off["enabled"] else "disabled"),
            ("exempt tools", ", ".join(off["exempt_tools"]) or "none"),
            (
                "artifacts",
                f"{off['root']} (preview {_n(off['preview_chars'])} chars, "
                f"{_bytes(off['max_bytes_per_thread'])} per thread, "
                f"{'kept forever' if age is None else f'kept {_n(age)} days'})",
            ),
            ("storage", data["storage"]["url"]),
            (
                "gateway",
                f"http://{gateway['host']}:{gateway['port']} "
                f"(bodies ≤ {_bytes(gateway['max_body_bytes'])})",
            ),
            ("tools", ", ".join(data["tools"]) or "none"),
            ("skills", data["skills"]["container_path"]),
        ],
    )


def render_summary(data: dict[str, Any]) -> RenderableType:
    """Render `summarize_config` output as one screen of rich tables."""
    source = _grid(None, [("file", data["path"] or "none (built-in defaults)")])
    summarization = _summarization_grid(data["summarization"])
    return Panel(
        Group(source, "", _models_table(data), "", summarization, "", _rest_grid(data)),
        title="foldwise config",
        title_align="left",
        expand=False,
    )
