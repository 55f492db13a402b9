"""Reference of every configuration key, generated from the pydantic models and their docstrings.

Field docstrings (the string literal under each field, as in pydantic-ai) are the single source
of the descriptions; `foldwise config reference` prints them and `docs/configuration.md` embeds
the output.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from foldwise.config import ContextSize, FoldwiseConfig

__all__ = ["field_docstrings", "reference_markdown", "reference_rows"]

_REQUIRED = "(required)"

_VALUE_TYPES: tuple[type[BaseModel], ...] = (ContextSize,)
"""Models documented once in their own section and shown as a type elsewhere."""


@cache
def field_docstrings(cls: type[BaseModel]) -> dict[str, str]:
    """Map each field of `cls` (and its bases) to the docstring written under it."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not issubclass(klass, BaseModel) or klass is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # pragma: no cover - source not shipped
            continue
        node = ast.parse(source).body[0]
        if not isinstance(node, ast.ClassDef):  # pragma: no cover
            continue
        for stmt, following in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _strip_none(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) != len(get_args(tp))
    return tp, False


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(tp))
    if origin is Literal:
        return " | ".join(str(a) for a in get_args(tp))
    if origin is list:
        return f"list[{_type_name(get_args(tp)[0])}]"
    if tp is type(None):
        return "null"
    return str(getattr(tp, "__name__", tp))


def _yaml(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        value = [v.model_dump() if isinstance(v, BaseModel) else v for v in value]
    text: str = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1000)
    return text.strip()


_RULES: tuple[tuple[type[Any], str, str], ...] = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", ">= {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "<= {}"),
    (annotated_types.MinLen, "min_length", "length >= {}"),
    (annotated_types.MaxLen, "max_length", "length <= {}"),
)
"""(constraint type, its attribute, how the reference writes it)."""


def _constraints(info: FieldInfo) -> str:
    rules = [
        form.format(getattr(meta, attr))
        for meta in info.metadata
        for kind, attr, form in _RULES
        if isinstance(meta, kind)
    ]
    return "; ".join(rules)


def _section_model(tp: Any) -> tuple[type[BaseModel], bool] | None:
    """`(model, is_list)` when the field is a nested block rather than a value."""
    inner, _ = _strip_none(tp)
    is_list = get_origin(inner) is list
    if is_list:
        inner = get_args(inner)[0]
    if isinstance(inner, type) and issubclass(inner, BaseModel) and inner not in _VALUE_TYPES:
        return inner, is_list
    return None


def _rows(cls: type[BaseModel], prefix: str, out: list[dict[str, str]]) -> None:
    docs = field_docstrings(cls)
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in cls.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        section = _section_model(info.annotation)
        if section is not None:
            model, is_list = section
            nested.append((f"{key}[]" if is_list else key, model))
            continue
        out.append(
            {
                "section": prefix or "(top level)",
                "key": key,
                "type": _type_name(info.annotation),
                "default": _REQUIRED
                if info.is_required()
                else _yaml(info.get_default(call_default_factory=True)),
                "constraints": _constraints(info),
                "description": info.description or docs.get(name, ""),
            }
        )
    if cls.model_config.get("extra") == "allow":
        out.append(
            {
                "section": prefix,
                "key": f"{prefix}.<other>",
                "type": "any",
                "default": "",
                "constraints": "",
                "description": "Any other key is passed to the model class as a keyword option "
                "(`model`, `base_url`, `api_key`, `temperature`, ...); `$VAR` is expanded.",
            }
        )
    for key, model in nested:
        _rows(model, key, out)


@cache
def _all_rows() -> tuple[dict[str, str], ...]:
    out: list[dict[str, str]] = []
    _rows(FoldwiseConfig, "", out)
    for model in _VALUE_TYPES:
        _rows(model, model.__name__, out)
    return tuple(out)


def reference_rows() -> list[dict[str, str]]:
    """Every configuration key with its type, default, constraints and description."""
    return [dict(row) for row in _all_rows()]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def reference_markdown() -> str:
    """The reference as Markdown: one table per block, in file order."""
    lines: list[str] = []
    section = None
    for row in _all_rows():
        if row["section"] != section:
            section = row["section"]
            if lines:
                lines.append("")
            lines += [
                f"### `{section}`",
                "",
                "| Key | Type | Default | Constraints | Meaning |",
                "|---|---|---|---|---|",
            ]
        default = row["default"]
        if default and default != _REQUIRED:
            default = f"`{_cell(default)}`"
        lines.append(
            f"| `{row['key']}` | `{_cell(row['type'])}` | {default} | "
            f"{_cell(row['constraints'])} | {_cell(row['description'])} |"
        )
    return "\n".join(lines) + "\n"
