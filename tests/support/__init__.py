"""Test helpers shared by the suite (e.g. `from tests.support import OpenAIStub`)."""

from __future__ import annotations

from .openai_stub import OpenAIStub, ScriptedResponse, default_token_counter

__all__ = ["OpenAIStub", "ScriptedResponse", "default_token_counter"]
