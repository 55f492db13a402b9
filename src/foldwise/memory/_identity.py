"""Whose memory is this run's: the user id, from the run's config only.

The namespace of every memory read and write comes from here, never from a tool argument or a
message: in library runs ``configurable.user_id`` (else ``"default"``), in the gateway the
authenticated identity, which the gateway writes into ``configurable.user_id`` over whatever
the client sent.
"""

from __future__ import annotations

from foldwise._thread_id import configured, current_config
from foldwise.memory._facts import Namespace, namespace_for

__all__ = ["DEFAULT_USER", "USER_ID_KEY", "resolve_namespace", "resolve_user_id"]

DEFAULT_USER = "default"
USER_ID_KEY = "user_id"


def resolve_user_id(runtime_or_config: object = None) -> str:
    """The run's user id.

    Looks at a `ToolRuntime`'s / `Runtime`'s config, a config mapping, then the current
    LangGraph run's config; `DEFAULT_USER` when none names one.
    """
    config = getattr(runtime_or_config, "config", runtime_or_config)
    return (
        configured(config, USER_ID_KEY) or configured(current_config(), USER_ID_KEY) or DEFAULT_USER
    )


def resolve_namespace(runtime_or_config: object, agent: str) -> Namespace:
    """The run's namespace for `agent`.

    A malformed user id raises `MemoryInputError` naming ``namespace[1]``.
    """
    return namespace_for(resolve_user_id(runtime_or_config), agent)
