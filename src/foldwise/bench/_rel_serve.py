"""A real `foldwise serve` subprocess for the full forms of the injection and isolation areas.

`served` writes a config (the model: `stub_model_entry`, ChatOpenAI against an `OpenAIStub`
on 127.0.0.1) and runs it with `foldwise.bench._serve.serving` (a free loopback port, ready
on `/health`, stopped with SIGTERM afterwards). `stub_messages` turns a recorded OpenAI
request into LangChain messages so the same request checks apply (a data message is a user
message that starts with the data block's open tag: the hidden flag does not cross the wire).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from foldwise.bench._openai_stub import content_text
from foldwise.bench._serve import serving, write_config
from foldwise.durable import DATA_OPEN
from foldwise.messages import DURABLE_DATA_FLAG

__all__ = ["served", "stub_messages"]


@contextmanager
def served(config: Mapping[str, Any], workdir: Path) -> Iterator[str]:
    """Run `foldwise serve` with `config` in `workdir`; yield its base URL.

    Raises:
        ServerStartError: The server exited early or did not answer `/health` within 60 s.
    """
    with serving(write_config(workdir, config), workdir, check_exit=False) as server:
        yield server.url


def stub_messages(body: Mapping[str, Any]) -> list[BaseMessage]:
    """A recorded chat-completions request body as LangChain messages."""
    found: list[BaseMessage] = []
    for message in body.get("messages") or []:
        role, text = message.get("role"), content_text(message.get("content"))
        if role in ("system", "developer"):
            found.append(SystemMessage(text))
        elif role == "user":
            flag = {DURABLE_DATA_FLAG: True} if text.startswith(DATA_OPEN) else {}
            found.append(HumanMessage(text, additional_kwargs=flag))
        else:
            calls = json.dumps(message.get("tool_calls") or [])
            found.append(AIMessage(f"{text}\n{calls}" if role == "assistant" else text))
    return found
