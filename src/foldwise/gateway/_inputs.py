"""Run inputs besides new messages: `input: null`, `command` and `checkpoint` / `checkpoint_id`.

- `input: null` (or absent) continues the thread: no new messages, the graph resumes whatever
  its checkpoint has pending (agent-chat-ui's regenerate sends it with an earlier checkpoint).
- `command` is LangGraph's `Command`: `resume` (the answer to an `interrupt()`), `goto` (node
  names) and `update` (only `update.messages`, validated like `input.messages`: the agent's
  other channels are not the client's to write).
- `checkpoint` / `checkpoint_id` names the checkpoint to run from: the thread's head runs as
  usual, an earlier one forks the thread there (LangGraph's own semantics: the new run branches
  from that checkpoint and the thread head becomes the branch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._messages import parse_input_messages
from foldwise.gateway._schemas import checkpoint_id_checked

__all__ = ["RunInput", "checked_goto", "parse_messages_object", "parse_run_input"]

_COMMAND_KEYS = ("resume", "goto", "update")


@dataclass(frozen=True)
class RunInput:
    """What a run body asks the graph to do.

    Attributes:
        messages: New messages (from `input.messages` or `command.update.messages`).
        command: `{resume?, goto?}` when the body sent a `command` (messages go in `update`).
        checkpoint_id: The checkpoint to run from (`None`: the thread head).
    """

    messages: list[BaseMessage] = field(default_factory=list)
    command: dict[str, Any] | None = None
    checkpoint_id: str | None = None

    @property
    def continues(self) -> bool:
        """No new messages and no command: the graph resumes what its checkpoint has pending."""
        return not self.messages and self.command is None


def _checkpoint_id(checkpoint: Mapping[str, Any] | None, checkpoint_id: str | None) -> str | None:
    if checkpoint is not None:
        namespace = checkpoint.get("checkpoint_ns") or ""
        if namespace != "":
            raise RequestFieldError(
                "checkpoint.checkpoint_ns", "only the root graph's checkpoints can be run from"
            )
        inner = checkpoint.get("checkpoint_id")
        if inner is not None and not isinstance(inner, str):
            raise RequestFieldError("checkpoint.checkpoint_id", "must be a string")
        if inner is not None and checkpoint_id is not None and inner != checkpoint_id:
            raise RequestFieldError("checkpoint_id", "differs from checkpoint.checkpoint_id")
        checkpoint_id = checkpoint_id or inner
    if checkpoint_id is not None:
        checkpoint_id_checked(checkpoint_id, "checkpoint_id")
    return checkpoint_id


def _command(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[BaseMessage]]:
    extra = sorted(set(raw) - set(_COMMAND_KEYS))
    if extra:
        raise RequestFieldError(f"command.{extra[0]}", "use resume, goto or update")
    command: dict[str, Any] = {}
    if raw.get("resume") is not None:
        command["resume"] = raw["resume"]
    goto = raw.get("goto")
    if goto is not None:
        names = [goto] if isinstance(goto, str) else goto
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise RequestFieldError("command.goto", "must be a node name or a list of node names")
        command["goto"] = names
    update = raw.get("update")
    messages = [] if update is None else parse_messages_object(update, "command.update")
    if not command and not messages:
        raise RequestFieldError("command", "needs resume, goto or update.messages")
    return command, messages


def parse_messages_object(value: Any, field: str, *, lenient: bool = False) -> list[BaseMessage]:
    """`{"messages": [...]}` and nothing else, its messages parsed like run input.

    The other channels are the agent's: a client writes only messages (`input`,
    `command.update`, `update_state`'s `values`). With `lenient`, no messages (or one message
    object instead of a list) is accepted, as `update_state` does.

    Raises:
        RequestFieldError: Naming `field`, or its first channel other than `messages` (422).
    """
    if not isinstance(value, Mapping):
        raise RequestFieldError(field, 'must be an object: {"messages": [...]}')
    others = sorted(set(value) - {"messages"})
    if others:
        raise RequestFieldError(
            f"{field}.{others[0]}",
            f"only {field}.messages is accepted; other channels are the agent's",
        )
    raw = value.get("messages")
    if lenient:
        if raw is None or raw == []:
            return []
        raw = [raw] if isinstance(raw, dict) else raw
    return parse_input_messages(raw, field=f"{field}.messages")


def parse_run_input(
    run_input: Mapping[str, Any] | None,
    command: Mapping[str, Any] | None,
    checkpoint: Mapping[str, Any] | None,
    checkpoint_id: str | None,
) -> RunInput:
    """Validate a run body's `input`, `command` and checkpoint fields.

    Raises:
        RequestFieldError: Naming the first invalid field (422).
    """
    start = _checkpoint_id(checkpoint, checkpoint_id)
    if command is not None:
        if run_input:
            raise RequestFieldError("input", "send either input or command, not both")
        parsed, messages = _command(command)
        return RunInput(messages, parsed, start)
    if run_input is None:
        return RunInput(checkpoint_id=start)
    return RunInput(parse_messages_object(run_input, "input"), None, start)


def checked_goto(command: dict[str, Any] | None, nodes: Sequence[str]) -> dict[str, Any] | None:
    """`command` with its `goto` made safe for the agent graph whose nodes are `nodes`.

    Jumping straight to a node skips the steps before it (compaction, offload, durable
    capture), so the only target is the start of a model step: `model` (or the loop's entry
    node itself) is sent to the first node of that step, where every middleware runs.

    Raises:
        RequestFieldError: Any other target (422).
    """
    if not command or "goto" not in command:
        return command
    entry = next((n for n in nodes if n.endswith(".before_model")), "model")
    for name in command["goto"]:
        if name not in ("model", entry):
            raise RequestFieldError(
                "command.goto",
                f"{name!r} is not supported: only 'model' (the next model step, with all of "
                "foldwise's middleware) can be jumped to",
            )
    return {**command, "goto": entry}
