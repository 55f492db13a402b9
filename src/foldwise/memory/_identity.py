"""Whose memory is this run's: the user id, from the run's config only.

The namespace of every memory read and write comes from here, never from a tool argument or a
message: in library runs ``configurable.user_id`` (else ``"default"``), in the gateway the
authenticated identity, which the gateway writes into ``configurable.user_id`` over whatever
the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping

from langgraph.config import get_config

from foldwise.memory._facts import Namespace, namespace_for

__all__ = ["DEFAULT_USER", "USER_ID_KEY", "resolve_namespace", "resolve_user_id"]

DEFAULT_USER = "default"
USER_ID_KEY = "user_id"


def _configured(config: object) -> str | None:
    if not isinstance(config, Mapping):
        return None
    configurable = config.get("configurable")
    value = configurable.get(USER_ID_KEY) if isinstance(configurable, Mapping) else None
    return None if value is None or value == "" else str(value)


def _current_config() -> object:
    try:
        return get_config()
    except RuntimeError:  # not inside a LangGraph run
        return None


def resolve_user_id(runtime_or_config: object = None) -> str:
    """The run's user id.

    Looks at a `ToolRuntime`'s / `Runtime`'s config, a config mapping, then the current
    LangGraph run's config; `DEFAULT_USER` when none names one.
    """
    config = getattr(runtime_or_config, "config", runtime_or_config)
    return _configured(config) or _configured(_current_config()) or DEFAULT_USER


def resolve_namespace(runtime_or_config: object, agent: str) -> Namespace:
    """The run's namespace for `agent`.

    A malformed user id raises `MemoryInputError` naming ``namespace[1]``.
    """
    return namespace_for(resolve_user_id(runtime_or_config), agent)
