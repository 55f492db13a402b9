"""The scripted OpenAI-compatible server, for tests (it lives in `foldwise.bench._openai_stub`)."""

from foldwise.bench._openai_stub import OpenAIStub, ScriptedResponse, default_token_counter

__all__ = ["OpenAIStub", "ScriptedResponse", "default_token_counter"]
