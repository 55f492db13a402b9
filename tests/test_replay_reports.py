"""Replay end to end: files in every format, peers, overflow handling, reports and the demo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from foldwise.config import parse_config
from foldwise.replay import (
    Trace,
    compare_trace,
    dump_trace,
    format_summary,
    get_system,
    render_html_report,
    replay_system,
    replay_trace,
    run_demo,
    sparkline,
    summary_table,
    write_html_report,
)
from foldwise.replay._driver import split_turns
from tests.test_replay_loaders import conversation


def small_config(window: int = 128000, **summarization: object) -> object:
    return parse_config(
        {
            "models": [{"name": "run", "context_window": window}],
            "summarization": {"model_name": "extractive", **summarization},
        }
    )


@pytest.mark.parametrize("fmt", ["openai", "openai-requests", "anthropic", "langchain"])
def test_replay_a_file_in_every_format(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"{fmt}.jsonl"
    path.write_text(dump_trace(conversation(), fmt), "utf-8")  # type: ignore[arg-type]
    report = replay_trace(path, config=small_config())  # type: ignore[arg-type]
    assert report.error is None
    # The conversation grows 1 → 4 → 6 messages (plus the durable contract and block if shown).
    assert [c.messages - (2 if c.durable_tokens else 0) for c in report.calls] == [1, 4, 6]
    assert report.offloaded_count == 1  # the ~90k-character retrieval
    assert report.human_kept == 1.0 and report.human_verbatim == 1.0
    assert report.rejections == 0 and report.orphans == 0
    # Parts add up, and the offloaded result is not in the request any more.
    for call in report.calls:
        assert call.tokens == (
            call.system_tokens + call.tool_tokens + call.durable_tokens + call.message_tokens
        )
    assert report.calls[1].message_tokens < 10_000


def test_same_numbers_whatever_the_file_format(tmp_path: Path) -> None:
    totals = set()
    for fmt in ("openai", "anthropic", "langchain"):
        path = tmp_path / f"{fmt}.json"
        path.write_text(dump_trace(conversation(), fmt), "utf-8")  # type: ignore[arg-type]
        report = replay_trace(path, config=small_config(), exact=True)  # type: ignore[arg-type]
        totals.add(tuple(c.exact_tokens for c in report.calls))
    assert len(totals) == 1


def test_split_turns_handles_odd_traces() -> None:
    messages: list[BaseMessage] = [
        SystemMessage("sys"),
        AIMessage("I start without a question."),
        AIMessage("And say a second thing."),
        HumanMessage("ok"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "x1"}]),
        ToolMessage("stray", tool_call_id="nope"),
        HumanMessage("never mind"),
        AIMessage("fine"),
    ]
    turns, results, warnings = split_turns(Trace.from_messages(messages))
    assert [len(t.answers) for t in turns] == [2, 1, 1]
    assert [len(t.inputs) for t in turns] == [0, 1, 1]
    assert not results and "unknown call nope" in warnings[0]
    report = replay_trace(Trace.from_messages(messages), config=small_config())  # type: ignore[arg-type]
    assert report.error is None
    assert [c.synthetic for c in report.calls] == [False, False, False, True, False]
    assert len(report.real_calls) == 4
    assert any("no recorded result" in w for w in report.warnings)


def overflow_session() -> list[BaseMessage]:
    chunk = "账本服务在结算窗口关闭后拒绝了批次，需要人工复核并重新提交。" * 220
    messages: list[BaseMessage] = [SystemMessage("你是运维助手。")]
    for t in range(6):
        messages += [
            HumanMessage(f"第 {t} 轮：检查批次 B-{t}。"),
            AIMessage("", tool_calls=[{"name": "logs", "args": {"batch": t}, "id": f"c{t}"}]),
            ToolMessage(chunk, tool_call_id=f"c{t}", name="logs"),
            AIMessage(f"批次 B-{t} 已检查。"),
        ]
    return messages


def test_peer_overflow_is_counted_and_forced_through() -> None:
    trace = Trace.from_messages(overflow_session(), name="overflow")
    cfg = small_config(window=20000, trigger={"type": "tokens", "value": 12000})
    comparison = compare_trace(trace, config=cfg, peers=("langchain", "raw"), window=20000)  # type: ignore[arg-type]
    fw = comparison.foldwise
    lc = comparison.report("langchain")
    raw = comparison.report("raw")
    assert lc is not None and raw is not None
    assert fw.rejections == 0 and fw.failures == 0 and fw.compaction_count >= 1
    assert lc.rejections > 0 and lc.failures == lc.rejections  # Chinese: chars/4 never triggers
    assert raw.window is None and raw.rejections == 0
    assert len(lc.real_calls) == len(fw.real_calls) == 12
    ratios = comparison.ratios()["langchain"]
    assert ratios["total_tokens"] is not None and ratios["total_tokens"] < 1
    data = comparison.to_dict()
    assert data["reports"][0]["summary"]["overflow_rejections"] == 0


def test_deepagents_runs_or_says_why_not() -> None:
    report = replay_system(
        Trace.from_messages(overflow_session()),
        get_system("deepagents"),
        config=small_config(),  # type: ignore[arg-type]
    )
    try:
        import deepagents  # noqa: F401
    except ImportError:
        assert not report.available and "bench" in (report.note or "")
        assert "not run" in format_summary([report])
    else:
        assert report.available and report.error is None


def test_unknown_system() -> None:
    with pytest.raises(ValueError, match="unknown system"):
        get_system("letta")


def test_terminal_summary_and_rich_table() -> None:
    comparison = compare_trace(
        Trace.from_messages(overflow_session(), name="ops"),
        config=small_config(window=20000, trigger={"type": "tokens", "value": 12000}),  # type: ignore[arg-type]
        peers=("langchain",),
        window=20000,
    )
    text = format_summary(comparison.reports)
    assert text.startswith("Replay of ops: 12 model calls, window 20,000")
    assert "foldwise" in text and "LangChain default" in text
    assert "compaction(s)" in text and "before call" in text
    assert re.search(r"[▁▂▃▄▅▆▇█]{6,}", text)
    table = summary_table(comparison.reports)
    assert table.row_count == 2
    assert sparkline([1, 2, 3, 4], width=4) == "▃▅▆█"
    assert sparkline([]) == ""


def test_html_report_is_self_contained(tmp_path: Path) -> None:
    comparison = compare_trace(
        Trace.from_messages(overflow_session(), name='ops <&> "quoted"'),
        config=small_config(window=20000, trigger={"type": "tokens", "value": 12000}),  # type: ignore[arg-type]
        peers=("langchain",),
        window=20000,
    )
    path = write_html_report(comparison.reports, tmp_path / "report.html")
    page = path.read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and "<polyline" in page and "<circle" in page
    assert "ops &lt;&amp;&gt; &quot;quoted&quot;" in page
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.IGNORECASE)
    assert "http" not in page
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert page == render_html_report(comparison.reports).replace(
        re.search(r"Generated [^.]+\.", render_html_report(comparison.reports)).group(0),  # type: ignore[union-attr]
        re.search(r"Generated [^.]+\.", page).group(0),  # type: ignore[union-attr]
    )


def test_demo_quick(tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo.html", quick=True)
    assert result.html_path is not None and result.html_path.exists()
    assert [c.trace for c in result.comparisons] == [
        "proposal_review",
        "corpus_timeline",
        "coding_zh",
    ]
    text = str(result)
    assert "foldwise" in text and "LangChain default" in text and "report:" in text
    for comparison in result.comparisons:
        fw = comparison.foldwise
        assert fw.rejections == 0 and fw.human_kept == 1.0
    assert "| session |" in result.to_markdown()
    assert result.to_dict()["sessions"][0]["trace"] == "proposal_review"
