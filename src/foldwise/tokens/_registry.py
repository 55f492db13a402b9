"""`get_counter`: one shared `TokenCounter` per tokenizer, resolved from config or a name."""

from __future__ import annotations

import threading

from foldwise.config import FoldwiseConfig, ModelConfig
from foldwise.errors import ConfigError
from foldwise.tokens._counter import TokenCounter
from foldwise.tokens._estimate import estimate_tokens
from foldwise.tokens._exact import EXACT_TOKENIZERS, load_exact_counter

__all__ = ["ESTIMATE", "get_counter"]

ESTIMATE = "estimate"
"""Counter name of the script-aware estimate (`tokenizer: null`)."""

_lock = threading.Lock()
_counters: dict[str, TokenCounter] = {}


def _resolve(model: ModelConfig | str | None, config: FoldwiseConfig | None) -> tuple[str, str]:
    """Return `(tokenizer kind, what it was resolved from)`."""
    if model is None:
        entry = config.model() if config is not None else None
        if entry is None:
            return ESTIMATE, "the default"
        return entry.tokenizer or ESTIMATE, f"model {entry.name!r}"
    if isinstance(model, ModelConfig):
        return model.tokenizer or ESTIMATE, f"model {model.name!r}"
    entry = config.model(model) if config is not None else None
    if entry is not None:
        return entry.tokenizer or ESTIMATE, f"model {entry.name!r}"
    if model == ESTIMATE or model in EXACT_TOKENIZERS:
        return model, f"tokenizer {model!r}"
    known = [*(config.model_names if config is not None else []), ESTIMATE, *EXACT_TOKENIZERS]
    raise ConfigError(
        f"{model!r} is neither a configured model nor a tokenizer (known: {', '.join(known)})"
    )


def get_counter(
    model: ModelConfig | str | None = None, *, config: FoldwiseConfig | None = None
) -> TokenCounter:
    """Return the shared `TokenCounter` for a model, a model name or a tokenizer name.

    Counters are shared per tokenizer so their caches are reused across callers.

    Args:
        model: A `ModelConfig`; a model name looked up in `config`; a tokenizer name
            (`"estimate"`, `"o200k_base"`, `"cl100k_base"`); or `None` for `config`'s default
            model (the estimate without a config).
        config: The loaded configuration, used to resolve model names.

    Returns:
        The counter.

    Raises:
        ConfigError: The name is unknown, or an exact tokenizer is configured but the
            `tokenizers` extra is not installed.
    """
    kind, source = _resolve(model, config)
    counter = _counters.get(kind)
    if counter is not None:
        return counter
    with _lock:
        counter = _counters.get(kind)
        if counter is not None:
            return counter
        if kind == ESTIMATE:
            counter = TokenCounter(ESTIMATE, estimate_tokens)
        else:
            try:
                count_text = load_exact_counter(kind)
            except ImportError as exc:
                raise ConfigError(
                    f"{source} uses tokenizer {kind!r}, which needs the optional tokenizers; "
                    "install them with: pip install 'foldwise[tokenizers]'"
                ) from exc
            counter = TokenCounter(kind, count_text)
        _counters[kind] = counter
    return counter
