"""ExtractiveSummarizer keeps facts present: real errors, the newest plan, every section's share.

Each test plants facts in an English or Chinese session (unique keys such as `Q0A-1`) and
checks that the summary a model would see still shows them, also after several merges.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from foldwise.summarizers import LANGUAGES, ExtractiveSummarizer
from foldwise.tokens import estimate_tokens
from tests.test_extractive import filler_log, sections, summary_prompt

EN = LANGUAGES["en"].headings
ZH = LANGUAGES["zh"].headings

PROSE_ZH = (
    "学习一门新语言时，犯错误是难免的。很多初学者害怕出现错误，其实每一个错误都在告诉你"
    "哪里还没有理解清楚，仔细阅读错误信息，往往比盲目修改代码更有效。"
)
PROSE_EN = (
    "Early iron bridges failed under heavy trains because cast iron is brittle in tension. "
    "Engineers learned from every failed span, and steel later made longer bridges possible."
)


def _tool_turn(index: int, result: str, *, path: str | None = None) -> list[BaseMessage]:
    """One tool call (a fetch, or a read of `path`) with its result."""
    name, args = ("read_file", {"path": path}) if path else ("fetch", {"page": index})
    return [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"t{index}"}]),
        ToolMessage(result, tool_call_id=f"t{index}", name=name),
    ]


def _run(spans: list[list[BaseMessage]], *, max_tokens: int = 1200) -> tuple[str, dict[str, str]]:
    """Summarize `spans` one compaction at a time, each merging the previous summary.

    Each span gets a neutral log result at its start, so that the budget is `max_tokens`
    rather than the share of a small input.
    """
    summarizer = ExtractiveSummarizer(max_tokens=max_tokens)
    summary: str | None = None
    for number, span in enumerate(spans):
        padded = [*_tool_turn(9000 + number, filler_log(300, "sync")), *span]
        text = summarizer.invoke([summary_prompt(padded, summary)]).content
        assert isinstance(text, str)
        assert estimate_tokens(text) <= max_tokens
        summary = text
    assert summary is not None
    return summary, sections(summary)


# -- cause 1: real error lines first, prose that mentions errors last, every item short ----------


def _zh_error_span(span: int) -> list[BaseMessage]:
    """A Chinese span whose tool results bury one real error between prose about errors."""
    messages: list[BaseMessage] = [HumanMessage(f"请检查第 {span} 批同步任务，不要修改线上配置。")]
    reals = [
        f"ERROR Q{span}A-1：同步分片时连接被对端重置。",
        f"KeyError: 'shard_Q{span}B'",
        f"失败：分片 Q{span}C 校验不通过",
    ]
    for index, real in enumerate(reals):
        prose = "\n".join([PROSE_ZH] * 3)
        messages += _tool_turn(span * 10 + index, f"{prose}\n{real}\n{prose}")
        messages.append(AIMessage(f"第 {index} 页看完了。"))
    return messages


def test_real_errors_in_tool_output_outrank_chinese_prose_that_mentions_errors() -> None:
    _, parts = _run([_zh_error_span(0)])
    errors = parts[ZH["errors"]]
    for key in ("Q0A-1", "shard_Q0B", "Q0C"):
        assert key in errors
    # The prose around them is what the old extractor kept instead: at most one line of it.
    assert errors.count("犯错误是难免的") <= 1


def test_real_errors_keep_their_rank_across_merges() -> None:
    _, parts = _run([_zh_error_span(span) for span in range(4)])
    errors = parts[ZH["errors"]]
    for span in range(4):
        for key in (f"Q{span}A-1", f"shard_Q{span}B", f"Q{span}C"):
            assert key in errors, key


def test_english_prose_about_failures_does_not_crowd_out_test_failures() -> None:
    spans = []
    for span in range(4):
        span_messages: list[BaseMessage] = [HumanMessage(f"Run batch {span} of the test suite.")]
        for index in range(3):
            verdict = f"FAILED tests/test_sync.py::test_shard_{span}{index} - AssertionError"
            body = "\n".join([PROSE_EN] * 3)
            span_messages += _tool_turn(span * 10 + index, f"{body}\n{verdict}\n{body}")
        spans.append(span_messages)
    _, parts = _run(spans)
    errors = parts[EN["errors"]]
    for span in range(4):
        for index in range(3):
            assert f"test_shard_{span}{index}" in errors
    assert errors.count("bridges failed") <= 1


def test_long_error_lines_are_clipped_with_their_head_kept() -> None:
    long_en = "ERROR R5X: replication lag exceeded " + "while copying segment data " * 60
    long_zh = "报错：R6Y 复制延迟超过阈值，" + "正在复制分段数据，" * 80
    messages: list[BaseMessage] = [HumanMessage("Why is replication slow? Check both replicas.")]
    messages += _tool_turn(1, "replica a\n" + long_en + "\nreplica a done")
    messages += _tool_turn(2, "replica b\n" + long_zh + "\nreplica b done")
    _, parts = _run([messages])
    items = [line[2:] for line in parts[EN["errors"]].splitlines()]
    by_key = {key: item for item in items for key in ("R5X", "R6Y") if key in item}
    assert by_key["R5X"].startswith("ERROR R5X: replication lag exceeded")
    assert by_key["R6Y"].startswith("报错：R6Y 复制延迟超过阈值")
    for item in items:
        assert len(item) <= 200
        assert estimate_tokens(item) <= 60


# -- cause 2: the newest stated plan, wherever it is in the span ----------------------------------


def _chatter(count: int, *, zh: bool = False) -> list[BaseMessage]:
    text = "第 {} 页没有新内容。" if zh else "Page {} has nothing new."
    return [AIMessage(text.format(index)) for index in range(count)]


def test_an_explicit_plan_stated_early_in_the_span_is_kept() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Port the importer to streaming reads."),
        AIMessage("Next step: switch the importer to streaming reads with chunk size 64K."),
        *_chatter(6),
    ]
    _, parts = _run([messages])
    assert "switch the importer to streaming reads with chunk size 64K" in parts[EN["next"]]


def test_a_chinese_plan_stated_early_in_the_span_is_kept() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("把导入任务改成流式读取。"),
        AIMessage("看完了。下一步：把导入任务迁移到 stream-P42 队列。"),
        *_chatter(6, zh=True),
    ]
    _, parts = _run([messages])
    assert "下一步：把导入任务迁移到 stream-P42 队列。" in parts[ZH["next"]]


def test_only_the_newest_explicit_plan_is_reported() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Clean up the billing jobs."),
        AIMessage("Next step: archive the billing job OLDPLAN-1."),
        *_chatter(4),
        AIMessage("Next step: delete the billing job NEWPLAN-2 instead."),
        *_chatter(4),
        AIMessage("I'll look at page 9 now."),
    ]
    _, parts = _run([messages])
    plan = parts[EN["next"]]
    assert "NEWPLAN-2" in plan
    assert "OLDPLAN-1" not in plan
    assert "I'll look at page 9 now." in plan  # a passing remark in the newest messages counts


def test_a_plan_stated_early_in_a_later_span_replaces_the_previous_plan() -> None:
    first: list[BaseMessage] = [
        HumanMessage("Clean up the billing jobs."),
        AIMessage("Next step: archive the billing job OLDPLAN-1."),
    ]
    second: list[BaseMessage] = [
        HumanMessage("Continue."),
        AIMessage("Next step: delete the billing job NEWPLAN-2."),
        *_chatter(5),
    ]
    _, parts = _run([first, second])
    assert "NEWPLAN-2" in parts[EN["next"]]
    assert "OLDPLAN-1" not in parts[EN["next"]]


# -- cause 3: compact items, shares per section, no repeats ----------------------------------------


def _fact_span(span: int, *, zh: bool) -> list[BaseMessage]:
    """A span with a constraint, a decision, a path read, a real error and bulky prose."""
    constraint = (
        f"约束：未经审批，不要删除 archive_{span} 目录里的任何文件。"
        if zh
        else f"Constraint: never delete anything in the archive_{span} folder without approval."
    )
    decision = (
        f"我决定采用分批写入（BATCH-{span}），因为单条写入太慢。"
        if zh
        else f"I decided to use batched writes (BATCH-{span}) because single writes were too slow."
    )
    error = (
        f"ERROR W{span}Z：写入分片时连接被重置。"
        if zh
        else f"ERROR W{span}Z: connection reset while writing the shard."
    )
    prose = "\n".join([PROSE_ZH if zh else PROSE_EN] * 4)
    path = f"src/ingest/writer_{span}.py"
    messages: list[BaseMessage] = [HumanMessage(constraint)]
    messages += _tool_turn(span * 10, f"{prose}\n{error}\n{prose}")
    messages += _tool_turn(span * 10 + 1, "def write(): ...\n", path=path)
    messages.append(AIMessage(decision))
    for index in range(2, 6):
        messages += _tool_turn(span * 10 + index, prose)
    return messages


def _assert_every_fact_present(parts: dict[str, str], spans: int, *, zh: bool) -> None:
    headings = ZH if zh else EN
    text = "\n".join(parts.values())
    for span in range(spans):
        assert f"archive_{span}" in parts[headings["constraints"]]
        assert f"BATCH-{span}" in parts[headings["decisions"]]
        assert f"W{span}Z" in parts[headings["errors"]]
        assert f"src/ingest/writer_{span}.py" in text


def test_the_oldest_errors_and_paths_survive_many_english_merges() -> None:
    _, parts = _run([_fact_span(span, zh=False) for span in range(8)])
    _assert_every_fact_present(parts, 8, zh=False)


def test_the_oldest_errors_and_paths_survive_many_chinese_merges() -> None:
    _, parts = _run([_fact_span(span, zh=True) for span in range(8)])
    _assert_every_fact_present(parts, 8, zh=True)


def test_long_constraints_and_decisions_cannot_starve_the_other_sections() -> None:
    messages: list[BaseMessage] = [HumanMessage("Audit the storage jobs.")]
    for index in range(30):
        messages.append(
            HumanMessage(
                f"Rule {index}: you must never change the retention policy, the storage class, "
                f"the lifecycle transitions or the replication targets of bucket logs-{index} "
                "unless the compliance team, the data owner and the on-call storage engineer "
                "have all approved the change in writing first."
            )
        )
        messages.append(
            AIMessage(
                f"I decided to keep bucket logs-{index} on the standard storage class because "
                "moving it would break the nightly compliance export, the archival restore "
                "drills and the weekly audit reports that the finance team relies on."
            )
        )
    for index in range(10):
        messages += _tool_turn(index, "ok\n", path=f"jobs/storage/job_{index}.py")
        messages += _tool_turn(100 + index, f"ERROR J{index}K: quota exceeded on bucket")
    _, parts = _run([messages])
    assert parts[EN["constraints"]].count("\n") >= 2
    assert parts[EN["decisions"]].count("\n") >= 2
    text = "\n".join(parts.values())
    for index in range(10):
        assert f"jobs/storage/job_{index}.py" in text
        assert f"J{index}K" in parts[EN["errors"]]


def test_an_artifact_is_not_repeated_when_a_decision_or_error_shows_it() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Fix the flaky sync."),
        AIMessage("I decided to pin the client to LIB-4242 because newer versions leak sockets."),
        *_tool_turn(1, "FAILED tests/sync/test_flaky.py::test_retry - TimeoutError"),
        AIMessage("I chose to drop webapp.py because it duplicates the CLI. The entry is app.py."),
        AIMessage("Next I will rewrite `retry_policy` in src/sync/retry.py."),
    ]
    _, parts = _run([messages])
    artifacts = parts[EN["artifacts"]]
    assert "webapp.py" in parts[EN["decisions"]]
    assert "- `webapp.py`" not in artifacts.splitlines()
    assert "- `app.py`" in artifacts.splitlines()  # a different file, not a quote of webapp.py
    assert "LIB-4242" in parts[EN["decisions"]]
    assert "LIB-4242" not in artifacts
    assert "tests/sync/test_flaky.py" in parts[EN["errors"]]
    assert "tests/sync/test_flaky.py" not in artifacts
    # The plan is replaced at the next merge, so what only it quotes stays listed.
    assert "`src/sync/retry.py`" in artifacts
    assert "`retry_policy`" in artifacts


# -- cause 4: paths with non-ASCII characters -----------------------------------------------------


def test_paths_with_chinese_characters_are_kept_whole() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("请检查报表导出为什么乱码。"),
        AIMessage(
            "我看了 src/报表/导出.py 和 docs/设计/编码说明.md，问题在修改src/orders/api.py文件里。"
        ),
        *_tool_turn(1, "ok\n", path="src/中文.py"),
        *_tool_turn(2, "见「数据/月报_2024.csv」与 ~/下载/样例.xlsx"),
    ]
    _, parts = _run([messages])
    artifacts = parts[ZH["artifacts"]].splitlines()
    for path in (
        "src/报表/导出.py",
        "docs/设计/编码说明.md",
        "src/orders/api.py",
        "src/中文.py",
        "数据/月报_2024.csv",
        "~/下载/样例.xlsx",
    ):
        assert f"- `{path}`" in artifacts, path
    # Prose glued to a path is not part of it.
    assert not any("修改" in item or "文件" in item for item in artifacts)


def test_paths_with_accented_letters_are_kept_whole() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Why does the import of the menu fail?"),
        AIMessage("The file is docs/café/menü_2024.txt and it has a BOM."),
    ]
    _, parts = _run([messages])
    assert "- `docs/café/menü_2024.txt`" in parts[EN["artifacts"]].splitlines()
