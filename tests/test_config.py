"""Configuration: every validation rule, DeerFlow compatibility, env interpolation, file lookup.

Each rejection is checked twice: `load_config` raises `ConfigError` whose message names the file
and the dotted key, and `foldwise config check` prints that message as one `error:` line and
exits 2.
"""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from foldwise.cli import app
from foldwise.compaction import CompactionPolicy
from foldwise.config import (
    CONFIG_ENV_VAR,
    DEFAULT_KEEP,
    ContextSize,
    FoldwiseConfig,
    OffloadConfig,
    SummarizationConfig,
    interpolate,
    load_config,
    parse_config,
)
from foldwise.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def write(tmp_path: Path, text: str, name: str = "foldwise.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def check_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["config", "check", *args])


def assert_rejected(path: Path, key: str, fragment: str) -> None:
    """`load_config` and `foldwise config check` both reject `path`, naming file and key."""
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert f"{key}: " in message, message
    assert fragment in message, message

    result = check_cli(str(path))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == f"error: {message}"


# --- rejected values --------------------------------------------------------------------------

TRIGGER = "summarization:\n  trigger:\n    - {{type: {type}, value: {value}}}\n"
KEEP = "summarization:\n  keep: {{type: {type}, value: {value}}}\n"

# fmt: off
REJECTED: list[tuple[str, str, str, str]] = [
    # (case id, yaml, dotted key, message fragment)
    ("nan", TRIGGER.format(type="tokens", value=".nan"), "summarization.trigger[0].value",
     "must be finite"),
    ("inf", KEEP.format(type="tokens", value=".inf"), "summarization.keep.value",
     "must be finite"),
    ("minus-inf-string", TRIGGER.format(type="tokens", value='"-inf"'),
     "summarization.trigger[0].value", "must be finite"),
    ("nan-string", KEEP.format(type="messages", value='"nan"'), "summarization.keep.value",
     "must be finite"),
    ("fraction-inf", TRIGGER.format(type="fraction", value=".inf"),
     "summarization.trigger[0].value", "must be finite"),
    ("fraction-percent", TRIGGER.format(type="fraction", value="80"),
     "summarization.trigger[0].value", "write 0.8 for 80%, not 80"),
    ("fraction-zero", TRIGGER.format(type="fraction", value="0"),
     "summarization.trigger[0].value", "write 0.8 for 80%, not 80"),
    ("fraction-negative", KEEP.format(type="fraction", value="-0.5"),
     "summarization.keep.value", "fraction must be in (0, 1]"),
    ("fraction-above-one", KEEP.format(type="fraction", value="1.01"),
     "summarization.keep.value", "fraction must be in (0, 1]"),
    ("messages-float", KEEP.format(type="messages", value="2.5"), "summarization.keep.value",
     "whole number"),
    ("tokens-float", TRIGGER.format(type="tokens", value="1000.5"),
     "summarization.trigger[0].value", "whole number"),
    ("messages-zero", KEEP.format(type="messages", value="0"), "summarization.keep.value",
     "greater than 0"),
    ("tokens-negative", TRIGGER.format(type="tokens", value="-1"),
     "summarization.trigger[0].value", "greater than 0"),
    ("tokens-text", TRIGGER.format(type="tokens", value="lots"),
     "summarization.trigger[0].value", "must be a number"),
    ("tokens-bool", TRIGGER.format(type="tokens", value="true"),
     "summarization.trigger[0].value", "must be a number"),
    ("messages-bool", KEEP.format(type="messages", value="false"), "summarization.keep.value",
     "must be a number"),
    ("fraction-bool", TRIGGER.format(type="fraction", value="true"),
     "summarization.trigger[0].value", "must be a number"),
    ("type-unknown", TRIGGER.format(type="percent", value="5"),
     "summarization.trigger[0].type", "'tokens', 'messages' or 'fraction'"),
    ("second-clause", "summarization:\n  trigger:\n    - {type: tokens, value: 100}\n"
     "    - {type: fraction, value: 90}\n", "summarization.trigger[1].value", "write 0.8"),
    ("single-dict-trigger", "summarization:\n  trigger: {type: fraction, value: 75}\n",
     "summarization.trigger[0].value", "write 0.8 for 80%"),
    ("prompt-without-placeholder", "summarization:\n  summary_prompt: 'Summarize {history}'\n",
     "summarization.summary_prompt", "{messages}"),
    ("trim-zero", "summarization:\n  trim_tokens_to_summarize: 0\n",
     "summarization.trim_tokens_to_summarize", "greater than 0"),
    ("trim-nan", "summarization:\n  trim_tokens_to_summarize: .nan\n",
     "summarization.trim_tokens_to_summarize", "must be finite"),
    ("timeout-nan", "summarization:\n  timeout_seconds: .nan\n",
     "summarization.timeout_seconds", "must be finite"),
    ("timeout-zero", "summarization:\n  timeout_seconds: 0\n", "summarization.timeout_seconds",
     "greater than 0"),
    ("preserve-mode", "summarization:\n  preserve_human: {mode: some}\n",
     "summarization.preserve_human.mode", "'all', 'latest' or 'none'"),
    ("reserved-negative", "summarization:\n  reserved_output_tokens: -1\n",
     "summarization.reserved_output_tokens", "greater than or equal to 0"),
    # unknown keys, at every level
    ("typo-top", "summarisation:\n  enabled: true\n", "summarisation", "unknown key"),
    ("typo-summarization", "summarization:\n  triger: []\n", "summarization.triger",
     "unknown key"),
    ("typo-keep", "summarization:\n  keep: {type: messages, value: 5, vaule: 6}\n",
     "summarization.keep.vaule", "unknown key"),
    ("typo-preserve", "summarization:\n  preserve_human: {mod: all}\n",
     "summarization.preserve_human.mod", "unknown key"),
    ("typo-offload", "offload:\n  tool_token_limt: 10\n", "offload.tool_token_limt",
     "unknown key"),
    ("typo-skills", "skills:\n  path: /x\n", "skills.path", "unknown key"),
    ("typo-storage", "storage:\n  uri: sqlite:///x.db\n", "storage.uri", "unknown key"),
    ("typo-gateway", "gateway:\n  hots: 0.0.0.0\n", "gateway.hots", "unknown key"),
    ("typo-memory", "memory:\n  enable: true\n", "memory.enable", "unknown key"),
    ("typo-tools", "tools:\n  - {use: 'a.b:c', name: x}\n", "tools[0].name", "unknown key"),
    ("typo-in-clause", "summarization:\n  trigger:\n    - {typ: tokens, value: 5}\n",
     "summarization.trigger[0].typ", "unknown key"),
    # models
    ("model-name-unknown", "summarization:\n  model_name: gpt-4o\n",
     "summarization.model_name", "'gpt-4o' names no configured model"),
    ("fallback-unknown", "models:\n  - {name: main}\nsummarization:\n  fallback: cheap\n",
     "summarization.fallback", "'cheap' names no configured model"),
    ("model-named-extractive", "models:\n  - {name: extractive}\n", "models[0].name",
     "built-in summarizer"),
    ("duplicate-model", "models:\n  - {name: a}\n  - {name: b}\n  - {name: a}\n",
     "models[2].name", "duplicate model name 'a'"),
    ("model-name-empty", "models:\n  - {name: ''}\n", "models[0].name", "at least 1"),
    ("model-name-missing", "models:\n  - {use: 'a.b:C'}\n", "models[0].name",
     "required key is missing"),
    ("model-use-malformed", "models:\n  - {name: m, use: langchain_openai.ChatOpenAI}\n",
     "models[0].use", "package.module:ClassName"),
    ("tokenizer-unknown", "models:\n  - {name: m, tokenizer: gpt2}\n", "models[0].tokenizer",
     "unknown tokenizer 'gpt2'"),
    ("window-zero", "models:\n  - {name: m, context_window: 0}\n", "models[0].context_window",
     "greater than 0"),
    ("window-float", "models:\n  - {name: m, context_window: 1000.5}\n",
     "models[0].context_window", "integer"),
    ("tool-use-malformed", "tools:\n  - {use: mypkg}\n", "tools[0].use", "module:ClassName"),
    # storage, offload, gateway
    ("storage-scheme", "storage:\n  url: mysql://u@h/db\n", "storage.url",
     "unknown storage URL 'mysql://u@h/db'"),
    ("storage-no-scheme", "storage:\n  url: ./foldwise.db\n", "storage.url",
     "unknown storage URL"),
    ("offload-negative", "offload:\n  tool_token_limit: -5\n", "offload.tool_token_limit",
     "greater than or equal to 0"),
    ("offload-preview", "offload:\n  preview_chars: 10\n", "offload.preview_chars",
     "greater than or equal to 200"),
    ("offload-age-nan", "offload:\n  max_age_days: .nan\n", "offload.max_age_days",
     "must be finite"),
    ("gateway-port", "gateway:\n  port: 70000\n", "gateway.port", "less than or equal to 65535"),
    ("section-not-mapping", "summarization: [1, 2]\n", "summarization", "dictionary"),
    # booleans are not numbers, and floats are finite, in every block (not only ContextSize)
    ("bool-context-window", "models:\n  - {name: m, context_window: true}\n",
     "models[0].context_window", "must be a number"),
    ("bool-port", "gateway:\n  port: true\n", "gateway.port", "must be a number"),
    ("bool-tool-limit", "offload:\n  tool_token_limit: true\n", "offload.tool_token_limit",
     "must be a number"),
    ("bool-trim", "summarization:\n  trim_tokens_to_summarize: true\n",
     "summarization.trim_tokens_to_summarize", "must be a number"),
    ("bool-max-compactions", "summarization:\n  max_compactions_per_run: false\n",
     "summarization.max_compactions_per_run", "must be a number"),
    ("bool-timeout", "summarization:\n  timeout_seconds: true\n",
     "summarization.timeout_seconds", "must be a number"),
    ("inf-timeout", "summarization:\n  timeout_seconds: .inf\n",
     "summarization.timeout_seconds", "must be finite"),
    ("inf-max-age", "offload:\n  max_age_days: .inf\n", "offload.max_age_days",
     "must be finite"),
    ("inf-string-limit", "offload:\n  human_token_limit: '-Infinity'\n",
     "offload.human_token_limit", "must be finite"),
    ("nan-string-window", "models:\n  - {name: m, context_window: 'nan'}\n",
     "models[0].context_window", "must be finite"),
]
# fmt: on


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [pytest.param(text, key, fragment, id=case) for case, text, key, fragment in REJECTED],
)
def test_invalid_value_is_rejected_naming_file_and_key(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    assert_rejected(write(tmp_path, text), key, fragment)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param(
            "summarization:\n  model_name: nope\n", "summarization.model_name", id="model"
        ),
        pytest.param("summarization:\n  fallback: nope\n", "summarization.fallback", id="fallback"),
        pytest.param("models:\n  - {name: a}\n  - {name: a}\n", "models[1].name", id="duplicate"),
        pytest.param("gateway:\n  port: true\n", "gateway.port", id="bool"),
        pytest.param(
            "summarization:\n  trigger: [{typ: tokens, value: 5}]\n",
            "summarization.trigger[0].typ",
            id="typo-in-clause",
        ),
    ],
)
def test_key_attribute_is_the_dotted_key(tmp_path: Path, text: str, key: str) -> None:
    """`ConfigError.key` is set for field, cross-field and unknown-key errors alike."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env={})
    assert info.value.key == key


def test_config_error_carries_path_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, TRIGGER.format(type="fraction", value="80"))
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.path == str(path)
    assert info.value.key == "summarization.trigger[0].value"
    assert str(info.value) == (
        f"{path}: summarization.trigger[0].value: fraction must be in (0, 1], got 80; "
        "write 0.8 for 80%, not 80"
    )


# --- files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            "summarization:\n  enabled: true\n  keep: {type: messages, value: 10\n"
            "gateway:\n  port: 1\n",
            4,
            id="unclosed-flow-mapping",
        ),
        pytest.param("summarization:\n  enabled: true\n   keep: 3\n", 3, id="bad-indent"),
        pytest.param('gateway:\n  host: "127.0.0.1\n', 3, id="unterminated-string"),
    ],
)
def test_invalid_yaml_names_the_line(tmp_path: Path, text: str, line: int) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: line {line}: invalid YAML: "):
        load_config(path, env={})
    result = check_cli(str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: line {line}: invalid YAML")
    assert len(result.stderr.splitlines()) == 1


def test_missing_file_is_an_error_when_a_path_is_given(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="file not found") as info:
        load_config(missing, env={})
    assert info.value.path == str(missing)
    result = check_cli(str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"error: {missing}: file not found\n"


@pytest.mark.parametrize(
    "text", ["- models\n- summarization\n", "just a string\n", "42\n"], ids=["list", "str", "int"]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="top level must be a mapping") as info:
        load_config(path, env={})
    assert info.value.path == str(path)
    result = check_cli(str(path))
    assert result.exit_code == 2
    assert "top level must be a mapping" in result.stderr


@pytest.mark.parametrize(
    "text", ["", "# only a comment\n", "---\n"], ids=["empty", "comment", "doc"]
)
def test_empty_file_gives_the_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text), env={}) == FoldwiseConfig()


def test_foldwise_config_env_var_selects_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "gateway: {port: 1111}\n")  # ./foldwise.yaml, overridden by the env var
    chosen = write(tmp_path, "gateway: {port: 2222}\n", name="other.yaml")
    monkeypatch.setenv(CONFIG_ENV_VAR, str(chosen))
    assert load_config().gateway.port == 2222
    assert load_config(env={CONFIG_ENV_VAR: str(chosen)}).gateway.port == 2222
    # an explicit path beats the env var
    assert load_config(tmp_path / "foldwise.yaml").gateway.port == 1111


def test_foldwise_config_env_var_naming_a_missing_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CONFIG_ENV_VAR, str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"missing\.yaml: file not found"):
        load_config()
    result = check_cli()
    assert result.exit_code == 2
    assert "missing.yaml: file not found" in result.stderr


def test_default_file_in_the_working_directory_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "gateway: {port: 3333}\n")
    assert load_config().gateway.port == 3333


def test_no_file_and_no_env_gives_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config() == FoldwiseConfig()
    monkeypatch.setenv(CONFIG_ENV_VAR, "")  # empty counts as unset
    assert load_config() == FoldwiseConfig()


# --- accepted shapes ------------------------------------------------------------------------


def test_defaults_follow_the_design() -> None:
    s = FoldwiseConfig().summarization
    assert s.enabled is True
    assert s.model_name is None
    assert s.fallback == "extractive"
    assert s.trigger == [ContextSize(type="tokens", value=32000)]
    assert s.keep == ContextSize(type="messages", value=10) == DEFAULT_KEEP
    assert s.trim_tokens_to_summarize == 15564
    assert s.summary_prompt is None
    assert s.skill_file_read_tool_names == ["read_file", "read", "view", "cat"]
    assert s.preserve_human.mode == "all"
    assert s.reserved_output_tokens == 4096
    config = FoldwiseConfig()
    assert config.storage.url == "sqlite:///.foldwise/foldwise.db"
    assert (config.gateway.host, config.gateway.port) == ("127.0.0.1", 8420)
    assert config.offload.tool_token_limit == 5000
    assert config.skills.container_path == "/mnt/skills"


def test_prompt_with_other_literal_braces_is_accepted_verbatim() -> None:
    prompt = 'Return JSON like {"a": 1} and {{doubled}}; history:\n{messages}\n{unrelated}'
    config = parse_config({"summarization": {"summary_prompt": prompt}}, env={})
    assert config.summarization.summary_prompt == prompt


def test_trim_null_disables_trimming_and_omitting_it_gives_15564(tmp_path: Path) -> None:
    nulled = load_config(write(tmp_path, "summarization:\n  trim_tokens_to_summarize: null\n"))
    assert nulled.summarization.trim_tokens_to_summarize is None
    assert CompactionPolicy.from_config(nulled).trim_tokens_to_summarize is None
    omitted = load_config(write(tmp_path, "summarization:\n  enabled: true\n", name="b.yaml"))
    assert omitted.summarization.trim_tokens_to_summarize == 15564


def test_single_dict_trigger_becomes_a_one_clause_list() -> None:
    config = parse_config({"summarization": {"trigger": {"type": "messages", "value": 50}}}, env={})
    assert config.summarization.trigger == [ContextSize(type="messages", value=50)]


def test_null_trigger_means_never_automatically() -> None:
    config = parse_config({"summarization": {"trigger": None}}, env={})
    assert config.summarization.trigger is None
    assert CompactionPolicy.from_config(config).triggers == ()


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ({"type": "fraction", "value": 1}, 1.0),
        ({"type": "fraction", "value": 0.8}, 0.8),
        ({"type": "fraction", "value": "0.5"}, 0.5),
        ({"type": "messages", "value": 2.0}, 2),
        ({"type": "tokens", "value": "100"}, 100),
        ({"type": "tokens", "value": "1e3"}, 1000),
    ],
)
def test_valid_context_sizes_are_normalised(clause: dict[str, Any], expected: float) -> None:
    config = parse_config({"summarization": {"keep": clause}}, env={})
    value = config.summarization.keep.value
    assert value == expected
    assert type(value) is type(expected)


def test_extractive_is_always_a_known_model() -> None:
    config = parse_config(
        {"summarization": {"model_name": "extractive", "fallback": "extractive"}}, env={}
    )
    assert config.summarization.model_name == "extractive"
    assert (
        parse_config({"summarization": {"fallback": None}}, env={}).summarization.fallback is None
    )


def test_model_name_and_fallback_may_name_configured_models() -> None:
    config = parse_config(
        {
            "models": [{"name": "main"}, {"name": "cheap"}],
            "summarization": {"model_name": "cheap", "fallback": "main"},
        },
        env={},
    )
    assert config.model_names == ["main", "cheap"]
    assert config.model() is not None and config.model().name == "main"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///.foldwise/foldwise.db",
        "postgresql://u@h/db",
        "postgres://u:p@h:5432/db",
        "memory://",
    ],
)
def test_known_storage_schemes_are_accepted(url: str) -> None:
    assert parse_config({"storage": {"url": url}}, env={}).storage.url == url


@pytest.mark.parametrize("tokenizer", [None, "o200k_base", "cl100k_base"])
def test_known_tokenizers_are_accepted(tokenizer: str | None) -> None:
    config = parse_config({"models": [{"name": "m", "tokenizer": tokenizer}]}, env={})
    assert config.models[0].tokenizer == tokenizer


def test_model_options_are_passed_through() -> None:
    config = parse_config(
        {
            "models": [
                {"name": "m", "model": "gpt-4o-mini", "temperature": 0, "context_window": 9000}
            ]
        },
        env={},
    )
    assert config.models[0].options == {"model": "gpt-4o-mini", "temperature": 0}
    assert config.models[0].context_window == 9000


# --- DeerFlow's block, unchanged ----------------------------------------------------------------

DEERFLOW_BLOCK = """\
summarization:
  enabled: true
  model_name: null
  trigger:
    - type: tokens
      value: 32000
  keep:
    type: messages
    value: 10
  trim_tokens_to_summarize: 15564
  summary_prompt: null
  skill_file_read_tool_names:
    - read_file
    - read
    - view
    - cat
"""


def test_deerflow_block_is_accepted_unchanged(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, DEERFLOW_BLOCK), env={})
    s = config.summarization
    assert s.enabled is True
    assert s.model_name is None
    assert s.trigger == [ContextSize(type="tokens", value=32000)]
    assert s.keep == ContextSize(type="messages", value=10)
    assert s.trim_tokens_to_summarize == 15564
    assert s.summary_prompt is None
    assert s.skill_file_read_tool_names == ["read_file", "read", "view", "cat"]


def test_deerflow_single_dict_trigger_is_accepted(tmp_path: Path) -> None:
    text = DEERFLOW_BLOCK.replace(
        "  trigger:\n    - type: tokens\n      value: 32000\n",
        "  trigger:\n    type: fraction\n    value: 0.8\n",
    )
    config = load_config(write(tmp_path, text), env={})
    assert config.summarization.trigger == [ContextSize(type="fraction", value=0.8)]


@pytest.mark.parametrize(
    "key",
    [
        "preserve_recent_skill_count",
        "preserve_recent_skill_tokens",
        "preserve_recent_skill_tokens_per_skill",
    ],
)
def test_legacy_skill_keys_are_accepted_with_a_warning(tmp_path: Path, key: str) -> None:
    path = write(tmp_path, DEERFLOW_BLOCK + f"  {key}: 5\n")
    with pytest.warns(
        UserWarning, match=rf"{re.escape(str(path))}: summarization\.{key} is no longer read"
    ):
        config = load_config(path, env={})
    assert config.summarization.keep.value == 10
    result = check_cli(str(path))
    assert result.exit_code == 0, result.output
    assert f"warning: {path}: summarization.{key} is no longer read" in result.stderr


def test_deerflow_example_file_loads() -> None:
    path = EXAMPLES / "deerflow-summarization.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(raw) == {"summarization"}
    assert set(raw["summarization"]) == {
        "enabled",
        "model_name",
        "trigger",
        "keep",
        "trim_tokens_to_summarize",
        "summary_prompt",
        "skill_file_read_tool_names",
    }
    config = load_config(path, env={})
    assert config.summarization.trigger == [ContextSize(type="tokens", value=32000)]
    assert config.summarization.keep == ContextSize(type="messages", value=10)
    assert config.summarization.trim_tokens_to_summarize == 15564


def test_full_example_loads_and_uses_every_key() -> None:
    path = EXAMPLES / "foldwise.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(raw) == set(FoldwiseConfig.model_fields)
    assert set(raw["summarization"]) == set(SummarizationConfig.model_fields)
    assert set(raw["offload"]) == set(OffloadConfig.model_fields)

    offline = load_config(path, env={})
    main = offline.model()
    assert main is not None
    assert main.name == "main"
    assert main.use == "langchain_openai:ChatOpenAI"
    assert main.context_window == 128000
    assert main.options == {"model": "gpt-4o-mini"}  # unset $OPENAI_* keys are dropped
    assert offline.summarization.model_name == "summarizer"
    assert offline.offload.tool_token_limit == 5000

    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_MODEL": "local-model",
        "FOLDWISE_TOOL_TOKEN_LIMIT": "0",
    }
    online = load_config(path, env=env)
    assert online.models[0].options == {
        "model": "local-model",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-test",
    }
    assert online.offload.tool_token_limit == 0


# --- environment interpolation ----------------------------------------------------------------


@pytest.mark.parametrize("ref", ["$KEY", "${KEY}", "${KEY:-fallback}"])
def test_variable_forms_expand(ref: str) -> None:
    data = {"models": [{"name": "m", "api_key": ref}]}
    assert parse_config(data, env={"KEY": "sk-1"}).models[0].options["api_key"] == "sk-1"


def test_default_applies_when_unset_or_empty() -> None:
    data = {"offload": {"root": "${ROOT:-/srv/artifacts}"}}
    assert parse_config(data, env={}).offload.root == "/srv/artifacts"
    assert parse_config(data, env={"ROOT": ""}).offload.root == "/srv/artifacts"
    assert parse_config(data, env={"ROOT": "/data"}).offload.root == "/data"


@pytest.mark.parametrize("ref", ["${LIMIT:-}", "$LIMIT", "${LIMIT}"])
@pytest.mark.parametrize("env", [{}, {"LIMIT": ""}], ids=["unset", "empty"])
def test_unset_or_empty_falls_back_to_the_field_default(ref: str, env: dict[str, str]) -> None:
    config = parse_config(
        {"offload": {"tool_token_limit": ref, "root": ref}, "storage": {"url": ref}}, env=env
    )
    assert config.offload.tool_token_limit == 5000
    assert config.offload.root == ".foldwise/artifacts"
    assert config.storage.url == "sqlite:///.foldwise/foldwise.db"


def test_zero_is_a_real_value() -> None:
    data = {"offload": {"tool_token_limit": "${LIMIT:-5000}"}}
    assert parse_config(data, env={"LIMIT": "0"}).offload.tool_token_limit == 0
    assert parse_config(data, env={}).offload.tool_token_limit == 5000
    assert parse_config(data, env={"LIMIT": "7000"}).offload.tool_token_limit == 7000


def test_interpolated_values_are_validated_with_their_key(tmp_path: Path) -> None:
    # block style: inside a flow mapping `{...}` the reference would need quotes
    path = write(
        tmp_path, "summarization:\n  trigger:\n    - type: fraction\n      value: ${FRAC:-80}\n"
    )
    with pytest.raises(ConfigError, match=r"summarization\.trigger\[0\]\.value: .*write 0\.8"):
        load_config(path, env={})
    config = load_config(path, env={"FRAC": "0.75"})
    assert config.summarization.trigger == [ContextSize(type="fraction", value=0.75)]


def test_interpolated_booleans_and_numbers_coerce() -> None:
    data = {"summarization": {"enabled": "${ON:-false}", "timeout_seconds": "$T"}}
    config = parse_config(data, env={"T": "2.5"})
    assert config.summarization.enabled is False
    assert config.summarization.timeout_seconds == 2.5


def test_interpolation_inside_a_longer_string() -> None:
    data = {
        "storage": {"url": "sqlite:///${DATA_DIR:-/var/lib}/foldwise.db"},
        "offload": {"root": "$HOME_DIR/artifacts-${SUFFIX}"},
    }
    config = parse_config(data, env={"HOME_DIR": "/home/ada", "SUFFIX": "x"})
    assert config.storage.url == "sqlite:////var/lib/foldwise.db"
    assert config.offload.root == "/home/ada/artifacts-x"
    # unset inside a longer string expands to nothing, the rest is kept
    assert parse_config(data, env={}).offload.root == "/artifacts-"


def test_double_dollar_is_a_literal_dollar() -> None:
    data = {"models": [{"name": "m", "api_key": "pa$$word", "user": "$$HOME", "x": "$$${V}"}]}
    options = parse_config(data, env={"HOME": "/root", "V": "v"}).models[0].options
    assert options == {"api_key": "pa$word", "user": "$HOME", "x": "$v"}


def test_interpolation_in_lists_and_from_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRA_TOOL", "web_fetch")
    config = parse_config({"offload": {"exempt_tools": ["read_offloaded", "$EXTRA_TOOL"]}})
    assert config.offload.exempt_tools == ["read_offloaded", "web_fetch"]


def test_interpolate_leaves_keys_and_non_strings_alone() -> None:
    data = {"$K": [1, 2.5, True, None, {"a": "${K}"}]}
    assert interpolate(data, {"K": "v"}) == {"$K": [1, 2.5, True, None, {"a": "v"}]}


def test_env_var_set_in_the_process_is_used_by_load_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "gateway:\n  port: ${PORT:-8420}\n")
    monkeypatch.setenv("PORT", "9000")
    assert load_config(path).gateway.port == 9000
    monkeypatch.setenv("PORT", "")
    assert load_config(path).gateway.port == 8420


# --- fraction clauses without a context window -------------------------------------------------

FRACTION_NO_WINDOW = """\
models:
  - {name: local, use: 'langchain_openai:ChatOpenAI', model: qwen}
summarization:
  trigger:
    - {type: tokens, value: 1000}
    - {type: fraction, value: 0.8}
  keep: {type: fraction, value: 0.3}
"""


def test_fraction_without_window_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(write(tmp_path, FRACTION_NO_WINDOW), env={})  # loading never fails
    with caplog.at_level(logging.WARNING, logger="foldwise"):
        policy = CompactionPolicy.from_config(config)
    assert [(t.kind, t.limit) for t in policy.triggers] == [("tokens", 1000)]
    assert policy.keep == DEFAULT_KEEP
    assert policy.context_window is None
    assert policy.budget_limit is None
    assert set(policy.dropped_clauses) == {
        ContextSize(type="fraction", value=0.8),
        ContextSize(type="fraction", value=0.3),
    }
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("dropped fraction trigger clauses" in m and "80%" in m for m in messages)
    assert any("keep 30% of window" in m and "default keep" in m for m in messages)


def test_only_fraction_triggers_without_window_never_fire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = parse_config(
        {
            "models": [{"name": "m"}],
            "summarization": {"trigger": {"type": "fraction", "value": 0.5}},
        },
        env={},
    )
    with caplog.at_level(logging.WARNING, logger="foldwise"):
        policy = CompactionPolicy.from_config(config)
    assert policy.triggers == ()
    assert any("will not fire" in r.getMessage() for r in caplog.records)


def test_fraction_resolves_against_the_run_model_window() -> None:
    config = parse_config(
        {
            "models": [
                {"name": "big", "context_window": 200000},
                {"name": "small", "context_window": 10000},
            ],
            "summarization": {
                "trigger": [{"type": "fraction", "value": 0.8}],
                "keep": {"type": "fraction", "value": 0.25},
                "model_name": "small",
            },
        },
        env={},
    )
    policy = CompactionPolicy.from_config(config)
    assert [(t.kind, t.limit) for t in policy.triggers] == [("fraction", 160000)]
    assert policy.keep_tokens() == 50000
    assert policy.budget_limit == 200000 - 4096
    small = CompactionPolicy.from_config(config, model_name="small")
    assert [t.limit for t in small.triggers] == [8000]
    assert small.dropped_clauses == ()


def test_config_check_reports_dropped_fraction_clauses(tmp_path: Path) -> None:
    path = write(tmp_path, FRACTION_NO_WINDOW)
    result = check_cli(str(path), "--json")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert any("dropped fraction trigger clauses" in w for w in warnings)
    assert any("keep 30% of window" in w for w in warnings)
    assert "error" not in result.stderr


def test_an_empty_section_means_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "foldwise.yaml"
    path.write_text("summarization:\n  # everything commented out\noffload:\n", encoding="utf-8")
    config = load_config(path)
    assert config.summarization.keep.value == 10
    assert config.offload.tool_token_limit == 5000


# --- cross-section checks (issue 10, item 12) ---------------------------------------------------

W = "models:\n  - {{name: m, context_window: {window}}}\n"

# fmt: off
CROSS_REJECTED: list[tuple[str, str, str, list[str]]] = [
    # (case id, yaml, dotted key, fragments: the other key and what to do)
    ("tool-limit-below-preview", "offload:\n  tool_token_limit: 500\n",
     "offload.tool_token_limit", ["offload.preview_chars", "at least 4,501"]),
    ("tool-limit-at-preview", "offload:\n  tool_token_limit: 4500\n",
     "offload.tool_token_limit", ["offload.preview_chars = 4,000", "at least 4,501",
                                  "offload.preview_chars to at most 3,999"]),
    ("human-limit-below-preview", "offload:\n  human_token_limit: 1000\n  preview_chars: 900\n",
     "offload.human_token_limit", ["offload.preview_chars = 900", "at least 1,401"]),
    ("reserved-at-window", W.format(window=4096), "summarization.reserved_output_tokens",
     ["models[0].context_window = 4,096", "below 4,096"]),
    ("reserved-above-second-window",
     "models:\n  - {name: a, context_window: 100000}\n  - {name: b, context_window: 2000}\n"
     "summarization:\n  reserved_output_tokens: 3000\n",
     "summarization.reserved_output_tokens", ["models[1].context_window = 2,000", "'b'"]),
    ("keep-tokens-above-trigger",
     "summarization:\n  trigger: {type: tokens, value: 32000}\n"
     "  keep: {type: tokens, value: 40000}\n",
     "summarization.keep", ["summarization.trigger[0] = 32000 tokens"]),
    ("keep-messages-equal-trigger",
     "summarization:\n  trigger: [{type: tokens, value: 9000}, {type: messages, value: 10}]\n"
     "  keep: {type: messages, value: 10}\n",
     "summarization.keep", ["summarization.trigger[1] = 10 messages"]),
    ("keep-fraction-above-trigger",
     W.format(window=100000) + "summarization:\n  trigger: {type: fraction, value: 0.5}\n"
     "  keep: {type: fraction, value: 0.6}\n",
     "summarization.keep", ["summarization.trigger[0] = 50% of window"]),
    ("keep-fraction-above-token-trigger",
     W.format(window=100000) + "summarization:\n  trigger: {type: tokens, value: 20000}\n"
     "  keep: {type: fraction, value: 0.3}\n",
     "summarization.keep", ["models[0].context_window = 100,000", "30,000 vs 20,000 tokens"]),
    ("keep-tokens-above-fraction-trigger",
     W.format(window=100000) + "summarization:\n  trigger: {type: fraction, value: 0.2}\n"
     "  keep: {type: tokens, value: 25000}\n",
     "summarization.keep", ["summarization.trigger[0] = 20% of window"]),
]
# fmt: on


@pytest.mark.parametrize(
    ("text", "key", "fragments"),
    [pytest.param(text, key, frags, id=case) for case, text, key, frags in CROSS_REJECTED],
)
def test_inconsistent_sections_are_rejected_naming_both_keys(
    tmp_path: Path, text: str, key: str, fragments: list[str]
) -> None:
    path = write(tmp_path, text)
    for fragment in fragments:
        assert_rejected(path, key, fragment)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.key == key


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("offload:\n  tool_token_limit: 4501\n", id="tool-limit-just-above"),
        pytest.param("offload:\n  tool_token_limit: 0\n", id="tool-offload-off"),
        pytest.param("offload:\n  tool_token_limit: 500\n  enabled: false\n", id="offload-off"),
        pytest.param(
            "offload:\n  tool_token_limit: 800\n  preview_chars: 299\n", id="small-preview"
        ),
        pytest.param(W.format(window=4097), id="reserved-just-below-window"),
        pytest.param(
            "summarization:\n  trigger: {type: messages, value: 5}\n"
            "  keep: {type: tokens, value: 90000}\n",
            id="messages-vs-tokens-not-comparable",
        ),
        pytest.param(
            "models:\n  - {name: m}\nsummarization:\n  trigger: {type: tokens, value: 1000}\n"
            "  keep: {type: fraction, value: 0.9}\n",
            id="fraction-without-window",
        ),
        pytest.param(
            "summarization:\n  trigger: null\n  keep: {type: tokens, value: 90000}\n",
            id="no-trigger",
        ),
    ],
)
def test_consistent_sections_load(tmp_path: Path, text: str) -> None:
    load_config(write(tmp_path, text), env={})


def test_notice_bound_covers_every_notice() -> None:
    from foldwise.config._checks import OFFLOAD_NOTICE_CHARS
    from foldwise.offload._models import ArtifactRef
    from foldwise.offload._notice import clipped_text, offloaded_text

    huge = 10**12
    for kind, source in (("tool", "t" * 64), ("human", "human")):
        ref = ArtifactRef(
            artifact_id="art_" + "f" * 24, thread_id="t", source=source, kind=kind, chars=huge,
            tokens=huge, size_bytes=huge, lines=huge, rows=huge, sha256="0" * 64,
            created_at="2026-01-01T00:00:00+00:00", preview="p",
        )  # fmt: skip
        assert len(offloaded_text("", ref, preview_chars=200)) <= OFFLOAD_NOTICE_CHARS
    clipped = clipped_text("", source="t" * 64, tokens=huge, preview_chars=200)
    assert len(clipped) <= OFFLOAD_NOTICE_CHARS


def test_examples_pass_the_cross_checks() -> None:
    for name in ("foldwise.yaml", "deerflow-summarization.yaml"):
        load_config(EXAMPLES / name, env={})
