"""The `foldwise` command line: config check output, the reference docs, bench, version, help."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import foldwise
import foldwise.bench
from foldwise.cli import app
from foldwise.cli._config_summary import mask_url
from foldwise.cli._reference import field_docstrings, reference_markdown, reference_rows
from foldwise.config import CONFIG_ENV_VAR, FoldwiseConfig
from foldwise.errors import ConfigError, StorageError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "foldwise.yaml"
DOC = ROOT / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def _restore_foldwise_logger() -> Iterator[None]:
    """`--log-level` configures the `foldwise` logger; give other tests their logger back."""
    logger = logging.getLogger("foldwise")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers, logger.level, logger.propagate = saved


def run(*args: str) -> Any:
    # wide enough that long temporary paths are not folded across lines
    return CliRunner(env={"COLUMNS": "200"}).invoke(app, list(args))


def write(tmp_path: Path, text: str, name: str = "foldwise.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --- root ---------------------------------------------------------------------------------------


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"foldwise {foldwise.__version__}\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["config", "bench", "--version", "--log-level"]),
        (("config",), ["check", "reference"]),
        (("config", "check"), ["--json", "FOLDWISE_CONFIG", "exits 2"]),
        (("config", "reference"), ["--json"]),
        (("bench",), ["tokens"]),
        (("bench", "tokens"), ["--quick", "--json", "--out"]),
    ],
)
def test_help_everywhere(args: tuple[str, ...], expected: list[str]) -> None:
    result = run(*args, "--help")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split()).lower()
    for word in expected:
        assert word.lower() in text


def test_unknown_command_and_bad_option_exit_2() -> None:
    assert run("frobnicate").exit_code == 2
    assert run("--log-level", "loud", "config", "check").exit_code == 2


def test_log_level_option_sends_foldwise_records_to_stderr(tmp_path: Path) -> None:
    path = write(tmp_path, "gateway: {port: 9}\n")
    result = run("--log-level", "info", "config", "check", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert logging.getLogger("foldwise").level == logging.INFO
    logging.getLogger("foldwise.cli.test").info("hello from a test")
    # the handler writes to whatever stderr is current (here pytest's capture), never crashes


def test_module_entry_point_in_a_real_process(tmp_path: Path) -> None:
    bad = write(tmp_path, "summarization:\n  keep: {type: fraction, value: 20}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "foldwise.cli", "config", "check", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"error: {bad}: summarization.keep.value: fraction must be in (0, 1], got 20; "
        "write 0.8 for 80%, not 80\n"
    )


# --- config check ------------------------------------------------------------------------------


def test_check_example_prints_a_one_screen_summary() -> None:
    result = run("config", "check", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b[" not in out  # not a terminal: no colour codes
    assert len(out.splitlines()) <= 45
    for expected in [
        str(EXAMPLE),
        "main (run)",
        "summarizer",
        "128,000",
        "≥ 32,000 tokens",
        "fraction 80% → ≥ 102,400 tokens",
        "10 messages",
        "15,564 tokens",
        "summarizer → main → extractive",
        "all, up to 20,000 tokens",
        "128,000 − 4,096 reserved = 123,904",
        "min gain 1,000 tokens",
        "sqlite:///.foldwise/foldwise.db",
        "http://127.0.0.1:8420",
    ]:
        assert expected in out, expected
    assert result.stderr == ""


def test_check_json_is_machine_readable() -> None:
    result = run("config", "check", str(EXAMPLE), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["path"] == str(EXAMPLE)
    assert data["run_model"] == "main"
    assert data["models"][0] == {
        "name": "main",
        "class": "langchain_openai:ChatOpenAI",
        "model": "gpt-4o-mini",
        "context_window": 128000,
        "tokenizer": "estimate",
    }
    s = data["summarization"]
    assert s["automatic"] == "on"
    assert [(t["type"], t["status"], t["limit"]) for t in s["triggers"]] == [
        ("tokens", "active", 32000),
        ("fraction", "active", 102400),
    ]
    assert s["keep"]["type"] == "messages" and s["keep"]["value"] == 10
    assert s["keep"]["fell_back"] is False
    assert s["trim_tokens_to_summarize"] == 15564
    assert s["summarizers"] == ["summarizer", "main", "extractive"]
    assert s["budget"] == {
        "context_window": 128000,
        "reserved_output_tokens": 4096,
        "limit": 123904,
    }
    assert s["anti_thrash"] == {
        "min_gain_tokens": 1000,
        "max_compactions_per_run": 3,
        "fallback_after_failures": 2,
    }
    assert s["preserve_human"] == {"mode": "all", "max_tokens": 20000}
    assert data["offload"]["tool_token_limit"] == 5000
    assert data["storage"] == {"url": "sqlite:///.foldwise/foldwise.db", "scheme": "sqlite"}
    assert data["gateway"]["port"] == 8420
    assert data["warnings"] == []


def test_check_shows_disabled_trimming_and_never_firing_triggers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        summarization:
          trigger: null
          trim_tokens_to_summarize: null
          fallback: null
        """,
    )
    result = run("config", "check", str(path))
    assert result.exit_code == 0, result.output
    assert "disabled (null)" in result.stdout
    assert "never (trigger: null)" in result.stdout
    data = json.loads(run("config", "check", str(path), "--json").stdout)
    assert data["summarization"]["trim_tokens_to_summarize"] is None
    assert data["summarization"]["triggers"] == []
    assert data["summarization"]["summarizers"] == []
    assert data["summarization"]["automatic"] == "never (trigger: null)"


def test_check_disabled_summarization(tmp_path: Path) -> None:
    path = write(tmp_path, "summarization: {enabled: false}\n")
    data = json.loads(run("config", "check", str(path), "--json").stdout)
    assert data["summarization"]["automatic"] == "disabled"


def test_check_marks_dropped_fraction_clauses_and_warns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        models:
          - {name: local, model: qwen}
        summarization:
          trigger:
            - {type: fraction, value: 0.8}
          keep: {type: fraction, value: 0.3}
        """,
    )
    result = run("config", "check", str(path))
    assert result.exit_code == 0, result.output
    assert "fraction 80%: dropped" in " ".join(result.stdout.split())
    assert "unknown (the run model has no context_window)" in " ".join(result.stdout.split())
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("warning: ") for line in lines)
    assert any("will not fire" in line for line in lines)
    assert any("keep 30% of window" in line for line in lines)

    as_json = run("config", "check", str(path), "--json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    s = data["summarization"]
    assert s["automatic"] == "never (no usable trigger clause)"
    assert s["triggers"][0]["status"] == "dropped"
    assert s["triggers"][0]["limit"] is None
    assert s["keep"] == {
        "type": "messages",
        "value": 10,
        "tokens": None,
        "configured": {"type": "fraction", "value": 0.3},
        "fell_back": True,
    }
    assert s["budget"]["limit"] is None
    assert data["warnings"] == [line.removeprefix("warning: ") for line in lines]


def test_check_resolves_fraction_keep_against_the_window(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        models: [{name: m, context_window: 100000}]
        summarization:
          keep: {type: fraction, value: 0.25}
          reserved_output_tokens: 0
        """,
    )
    data = json.loads(run("config", "check", str(path), "--json").stdout)
    assert data["summarization"]["keep"]["tokens"] == 25000
    assert data["summarization"]["budget"]["limit"] == 100000
    assert "25% of window = 25,000 tokens" in run("config", "check", str(path)).stdout


def test_check_masks_the_storage_password(tmp_path: Path) -> None:
    path = write(tmp_path, "storage: {url: 'postgresql://ada:s3cret@db:5432/fw'}\n")
    result = run("config", "check", str(path))
    assert "s3cret" not in result.stdout
    assert "postgresql://ada:***@db:5432/fw" in result.stdout
    data = json.loads(run("config", "check", str(path), "--json").stdout)
    assert data["storage"] == {"url": "postgresql://ada:***@db:5432/fw", "scheme": "postgresql"}


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("sqlite:///.foldwise/foldwise.db", "sqlite:///.foldwise/foldwise.db"),
        ("postgresql://ada@db/fw", "postgresql://ada@db/fw"),
        ("postgres://ada:pw@db/fw?sslmode=require", "postgres://ada:***@db/fw?sslmode=require"),
        ("memory://", "memory://"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_check_never_prints_api_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "models: [{name: m, api_key: $KEY, context_window: 100000}]\n")
    result = CliRunner(env={"KEY": "sk-very-secret"}).invoke(
        app, ["config", "check", str(path), "--json"]
    )
    assert result.exit_code == 0
    assert "sk-very-secret" not in result.output


def test_check_without_a_path_uses_the_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    chosen = write(tmp_path, "gateway: {port: 9999}\n", name="chosen.yaml")
    monkeypatch.setenv(CONFIG_ENV_VAR, str(chosen))
    data = json.loads(run("config", "check", "--json").stdout)
    assert data["path"] == str(chosen)
    assert data["gateway"]["port"] == 9999


def test_check_without_a_path_uses_foldwise_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "gateway: {port: 7777}\n")
    data = json.loads(run("config", "check", "--json").stdout)
    assert data["path"] == "foldwise.yaml"
    assert data["gateway"]["port"] == 7777


def test_check_without_any_file_shows_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("config", "check", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["path"] is None
    assert data["models"] == []
    assert data["summarization"]["summarizers"] == ["extractive"]
    assert result.stderr.startswith("warning: no foldwise.yaml and no $FOLDWISE_CONFIG")
    assert "built-in defaults" in run("config", "check").stdout


def test_check_error_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "summarization:\n  trigger: [{type: fraction, value: 80}]\n")
    for args in ([str(path)], [str(path), "--json"]):
        result = run("config", "check", *args)
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr == (
            f"error: {path}: summarization.trigger[0].value: fraction must be in (0, 1], got 80; "
            "write 0.8 for 80%, not 80\n"
        )


# --- config reference and the docs --------------------------------------------------------------


def _all_keys(model: type[Any], prefix: str = "") -> list[str]:
    from pydantic import BaseModel

    keys = []
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        inner = info.annotation
        args = getattr(inner, "__args__", ())
        nested = [a for a in (inner, *args) if isinstance(a, type) and issubclass(a, BaseModel)]
        if nested and nested[0].__name__ != "ContextSize":
            is_list = getattr(inner, "__origin__", None) is list
            keys += _all_keys(nested[0], f"{key}[]" if is_list else key)
        else:
            keys.append(key)
    return keys


def test_reference_lists_every_field_with_its_docstring() -> None:
    rows = {row["key"]: row for row in reference_rows()}
    keys = _all_keys(FoldwiseConfig)
    assert "summarization.preserve_human.max_tokens" in keys
    assert "models[].context_window" in keys
    for key in keys:
        assert key in rows, key
        assert rows[key]["description"], f"{key} has no field docstring"
    assert rows["summarization.trim_tokens_to_summarize"]["default"] == "15564"
    assert rows["summarization.trigger"]["default"] == "[{type: tokens, value: 32000}]"
    assert rows["models[].name"]["default"] == "(required)"
    assert rows["gateway.port"]["constraints"] == ">= 1; <= 65535"
    assert rows["ContextSize.type"]["type"] == "tokens | messages | fraction"


def test_field_docstrings_are_read_from_the_source() -> None:
    docs = field_docstrings(FoldwiseConfig)
    assert docs["models"].startswith("Chat models; the first is the default run model")


def test_reference_command_prints_markdown_and_json() -> None:
    result = run("config", "reference")
    assert result.exit_code == 0
    assert result.stdout == reference_markdown()
    assert "| `summarization.keep` | `ContextSize` |" in result.stdout
    data = json.loads(run("config", "reference", "--json").stdout)
    assert {row["key"] for row in data} == {row["key"] for row in reference_rows()}


def test_docs_embed_the_generated_reference() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = "<!-- reference:start (generated by `foldwise config reference`) -->\n"
    end = "<!-- reference:end -->"
    assert start in text and end in text
    embedded = text.split(start, 1)[1].split(end, 1)[0]
    assert embedded.strip() == reference_markdown().strip(), (
        "docs/configuration.md is stale: paste the output of `foldwise config reference` "
        "between the reference markers"
    )


# --- bench --------------------------------------------------------------------------------------


class FakeReport:
    def __init__(self, quick: bool) -> None:
        self.quick = quick

    def to_dict(self) -> dict[str, Any]:
        return {"quick": self.quick, "classes": {"english": {"median_error": 0.03}}}

    def to_markdown(self) -> str:
        return "| class | median error |\n|---|---|\n| english | +3.0% |\n"


@pytest.fixture
def fake_bench(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    calls: list[bool] = []

    def run_token_benchmark(*, quick: bool = False) -> FakeReport:
        calls.append(quick)
        return FakeReport(quick)

    monkeypatch.setattr(foldwise.bench, "run_token_benchmark", run_token_benchmark, raising=False)
    return calls


def test_bench_tokens_prints_markdown(fake_bench: list[bool]) -> None:
    result = run("bench", "tokens", "--quick")
    assert result.exit_code == 0, result.output
    assert fake_bench == [True]
    assert result.stdout == "| class | median error |\n|---|---|\n| english | +3.0% |\n"


def test_bench_tokens_json_and_out(fake_bench: list[bool], tmp_path: Path) -> None:
    out = tmp_path / "tokens.json"
    result = run("bench", "tokens", "--json", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert fake_bench == [False]
    expected = {"quick": False, "classes": {"english": {"median_error": 0.03}}}
    assert json.loads(result.stdout) == expected
    assert json.loads(out.read_text(encoding="utf-8")) == expected


def test_bench_tokens_out_with_markdown(fake_bench: list[bool], tmp_path: Path) -> None:
    out = tmp_path / "tokens.json"
    result = run("bench", "tokens", "--out", str(out))
    assert result.exit_code == 0
    assert "| english |" in result.stdout
    assert result.stderr == f"wrote {out}\n"
    assert json.loads(out.read_text(encoding="utf-8"))["quick"] is False


def test_bench_tokens_unwritable_out_is_a_one_line_error(
    fake_bench: list[bool], tmp_path: Path
) -> None:
    result = run("bench", "tokens", "--out", str(tmp_path / "missing-dir" / "x.json"))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot write ")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("error", "code"),
    [(ConfigError("tokenizer 'o200k_base' needs the tokenizers extra"), 2), (StorageError("x"), 1)],
)
def test_bench_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, error: Exception, code: int
) -> None:
    def broken(*, quick: bool = False) -> FakeReport:
        raise error

    monkeypatch.setattr(foldwise.bench, "run_token_benchmark", broken, raising=False)
    result = run("bench", "tokens", "--quick")
    assert result.exit_code == code
    assert result.stderr == f"error: {error}\n"


def test_bench_unavailable_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(foldwise.bench, "run_token_benchmark", raising=False)
    result = run("bench", "tokens")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: the token benchmark is not available")
    assert len(result.stderr.splitlines()) == 1


def test_bench_tokens_quick_runs_the_real_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "tokens.json"
    result = run("bench", "tokens", "--quick", "--json", "--out", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == json.loads(out.read_text(encoding="utf-8"))
    assert data["quick"] is True
    assert {row["label"] for row in data["accuracy"]} >= {"English prose", "Chinese prose"}
    assert all(len(row["foldwise"]) == 3 for row in data["accuracy"])
    assert [row["messages"] for row in data["speed"]] == [100, 1000, 10000]


def test_check_renders_zero_limits_as_off_and_paths_literally(tmp_path: Path) -> None:
    path = write(tmp_path, "offload: {tool_token_limit: 0, enabled: true}\n", name="cfg[bold].yaml")
    result = run("config", "check", str(path))
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "tool results off (0), user input > 50,000 tokens" in out
    assert "cfg[bold].yaml" in out  # not swallowed as rich markup
    assert "bodies ≤ 8 MiB" in out


def test_bench_without_a_command_runs_the_whole_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bool, object]] = []

    def run_bench_suite(*, quick: bool = False, results_dir: object = None) -> FakeReport:
        calls.append((quick, results_dir))
        return FakeReport(quick)

    monkeypatch.setattr(foldwise.bench, "run_bench_suite", run_bench_suite)
    result = run("bench")
    assert result.exit_code == 0, result.output
    assert calls == [(False, None)]
    assert "| english |" in result.stdout


def test_offload_gc_reports_what_it_removed(tmp_path: Path) -> None:
    from foldwise.offload import FilesystemArtifactStore

    root = tmp_path / "artifacts"
    store = FilesystemArtifactStore(str(root))
    store.put("t1", "x" * 100, source="search", kind="tool")
    config = tmp_path / "foldwise.yaml"
    config.write_text(f"offload:\n  root: {root}\n  max_age_days: 0.000001\n", encoding="utf-8")
    import time

    time.sleep(0.2)
    result = run("offload", "gc", "--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["removed"]) == 1
    assert not list(root.rglob("*.txt"))


def test_replay_command_prints_the_comparison_and_writes_a_report(tmp_path: Path) -> None:
    from foldwise.replay import dump_trace
    from foldwise.replay.sessions import session_messages

    trace = tmp_path / "session.jsonl"
    trace.write_text(dump_trace(session_messages("coding_zh", quick=True)), encoding="utf-8")
    report = tmp_path / "report.html"
    result = run("replay", str(trace), "--peers", "langchain", "--report", str(report))
    assert result.exit_code == 0, result.output
    assert "foldwise" in result.stdout and "LangChain" in result.stdout
    html = report.read_text(encoding="utf-8")
    assert "<svg" in html and "http://" not in html and "https://" not in html
    as_json = run("replay", str(trace), "--peers", "", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)


def test_replay_names_the_bad_line(tmp_path: Path) -> None:
    trace = tmp_path / "broken.jsonl"
    trace.write_text('{"role": "user", "content": "hi"}\n{"role": \n', encoding="utf-8")
    result = run("replay", str(trace))
    assert result.exit_code == 2
    assert "line 2" in result.stderr


def test_demo_quick_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    result = run("demo", "--quick", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "proposal_review" in result.stdout and "LangChain default" in result.stdout
    assert out.is_file()


def test_bench_offload_shows_zero_compactions_with_offload_on() -> None:
    result = run("bench", "offload", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["on"]["compactions"] == 0 < data["off"]["compactions"]
    assert data["total_ratio_on_over_off"] < 0.75
