"""Load `foldwise.yaml`: environment interpolation, validation, errors that name the key."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from foldwise._dotted import dotted_key
from foldwise.config._models import FoldwiseConfig
from foldwise.errors import ConfigError

__all__ = ["CONFIG_ENV_VAR", "DEFAULT_CONFIG_PATH", "interpolate", "load_config", "parse_config"]

DEFAULT_CONFIG_PATH = "foldwise.yaml"
CONFIG_ENV_VAR = "FOLDWISE_CONFIG"

_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)
_UNSET = object()


def _lookup(name: str, env: Mapping[str, str]) -> str | None:
    value = env.get(name)
    # compose's habit: a variable set to "" counts as unset; "0" is a real value.
    return value if value else None


def _interpolate_str(text: str, env: Mapping[str, str]) -> Any:
    """Expand variables in one string; return `_UNSET` when a whole-value reference is empty."""
    whole = _VAR.fullmatch(text)
    if whole:
        name = whole.group("braced") or whole.group("bare")
        value = _lookup(name, env)
        if value is None:
            value = whole.group("default") or None
        return _UNSET if value is None else value

    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("bare")
        value = _lookup(name, env)
        if value is None:
            value = match.group("default") or ""
        return value

    return _VAR.sub(replace, text.replace("$$", "\0")).replace("\0", "$")


def interpolate(data: Any, env: Mapping[str, str] | None = None) -> Any:
    """Expand `$VAR`, `${VAR}` and `${VAR:-default}` in every string of a parsed YAML tree.

    A value that is exactly one reference and resolves to nothing (unset, or set to the empty
    string, with no non-empty default) is dropped from its mapping, so the field default applies
    instead of an empty string. `$$` is a literal dollar.
    """
    env = os.environ if env is None else env
    if isinstance(data, str):
        return _interpolate_str(data, env)
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            expanded = interpolate(value, env)
            if expanded is not _UNSET:
                out[key] = expanded
        return out
    if isinstance(data, list):
        items = [interpolate(v, env) for v in data]
        return [None if v is _UNSET else v for v in items]
    return data


_KEYED = re.compile(r"^(?P<key>[A-Za-z_][\w.\[\]]*): (?P<msg>.*)$", re.DOTALL)


def _format_validation_error(err: ValidationError, path: str | None) -> ConfigError:
    errors = err.errors(include_url=False)
    # A typo (an unknown key) explains the "missing" error next to it: report it first.
    first = sorted(errors, key=lambda e: e["type"] != "extra_forbidden")[0]
    # Skip pydantic's union-branch and function-name segments so the key stays a config key.
    loc = tuple(
        p
        for p in first["loc"]
        if not (
            isinstance(p, str)
            and (p.startswith("function-") or "[" in p or p in ("list[ContextSize]", "ContextSize"))
        )
    )
    msg = str(first["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if first["type"] == "extra_forbidden":
        msg = "unknown key (check the spelling; unknown keys are errors)"
    elif first["type"] == "missing":
        msg = "required key is missing"
    key = dotted_key(loc) or None
    keyed = _KEYED.match(msg) if key is None else None
    if keyed:  # cross-field checks name their key in the message
        key, msg = keyed.group("key"), keyed.group("msg")
    more = len(errors) - 1
    if more:
        msg += f" (and {more} more error{'s' if more > 1 else ''})"
    return ConfigError(msg, path=path, key=key)


def parse_config(
    data: Mapping[str, Any] | None, *, path: str | None = None, env: Mapping[str, str] | None = None
) -> FoldwiseConfig:
    """Validate an already-parsed configuration mapping (after env interpolation)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError("the top level must be a mapping of sections", path=path)
    expanded = interpolate(dict(data), env)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            config = FoldwiseConfig.model_validate(expanded)
    except ValidationError as err:
        raise _format_validation_error(err, path) from None
    for w in caught:
        warnings.warn(f"{path + ': ' if path else ''}{w.message}", UserWarning, stacklevel=3)
    return config


def load_config(
    path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None
) -> FoldwiseConfig:
    """Load and validate a foldwise configuration file.

    Args:
        path: The YAML file. Defaults to `$FOLDWISE_CONFIG`, then `foldwise.yaml`; when neither
            names an existing file and no path was given, the built-in defaults are returned.
        env: Environment for interpolation; defaults to `os.environ`.

    Raises:
        ConfigError: The file cannot be read or parsed, or a value is invalid. The message names
            the file and the dotted key.
    """
    environ = os.environ if env is None else env
    explicit = path is not None or bool(environ.get(CONFIG_ENV_VAR))
    chosen = Path(path if path is not None else environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)
    if not chosen.is_file():
        if explicit:
            raise ConfigError("file not found", path=str(chosen))
        return parse_config({}, env=environ)
    try:
        text = chosen.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read file: {err}", path=str(chosen)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{where}invalid YAML: {problem}", path=str(chosen)) from None
    return parse_config(data, path=str(chosen), env=environ)
