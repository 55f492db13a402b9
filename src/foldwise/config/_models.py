"""Pydantic models for every block of `foldwise.yaml`."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from foldwise.config._checks import check_budget, check_keep_below_trigger, check_offload
from foldwise.config._memory import MemoryConfig
from foldwise.config._strict import _Strict, reject_bool_and_non_finite

__all__ = [
    "BUILTIN_EXTRACTIVE",
    "DEFAULT_KEEP",
    "ApiKeyConfig",
    "ContextSize",
    "FoldwiseConfig",
    "GatewayAuthConfig",
    "GatewayConfig",
    "MemoryConfig",
    "ModelConfig",
    "OffloadConfig",
    "PreserveHumanConfig",
    "SkillsConfig",
    "StorageConfig",
    "SummarizationConfig",
    "ToolConfig",
]

BUILTIN_EXTRACTIVE = "extractive"
"""Name of the built-in offline summarizer; always resolvable, never configured."""

KNOWN_TOKENIZERS = ("o200k_base", "cl100k_base")
STORAGE_SCHEMES = ("sqlite", "postgresql", "postgres", "memory")
LEGACY_SUMMARIZATION_KEYS = (
    "preserve_recent_skill_count",
    "preserve_recent_skill_tokens",
    "preserve_recent_skill_tokens_per_skill",
)


class ContextSize(_Strict):
    """A size of context: a token count, a message count, or a fraction of the window.

    Used for triggers, for `keep`, and for the `/compact` request body.
    """

    type: Literal["tokens", "messages", "fraction"]
    """`tokens` and `messages` take a positive integer; `fraction` a number in (0, 1]."""
    value: int | float
    """The threshold; for `fraction`, relative to the run model's `context_window`."""

    @field_validator("value", mode="before")
    @classmethod
    def _check_value(cls, value: Any, info: ValidationInfo) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"must be a number, got {value!r}")
        if isinstance(value, str):
            try:
                value = float(value) if any(c in value for c in ".eEnN") else int(value)
            except ValueError:
                raise ValueError(f"must be a number, got {value!r}") from None
        if not math.isfinite(value):
            raise ValueError("must be finite")
        kind = info.data.get("type")
        if kind == "fraction":
            if not 0 < value <= 1:
                raise ValueError(
                    f"fraction must be in (0, 1], got {value}; write 0.8 for 80%, not 80"
                )
            return float(value)
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"{kind} must be a whole number, got {value}")
            value = int(value)
        if value <= 0:
            raise ValueError(f"{kind} must be greater than 0, got {value}")
        return int(value)

    def describe(self) -> str:
        """Render as a short human string, e.g. ``32000 tokens`` or ``80% of window``."""
        if self.type == "fraction":
            return f"{self.value:.0%} of window"
        return f"{self.value} {self.type}"


DEFAULT_KEEP = ContextSize(type="messages", value=10)
"""Keep used when none is configured, or when a fraction keep cannot be resolved."""


class ModelConfig(BaseModel):
    """One chat model entry; unknown keys are passed to the model class as keyword options."""

    model_config = ConfigDict(extra="allow", frozen=True)

    _numbers = field_validator("context_window", mode="before")(
        classmethod(reject_bool_and_non_finite)
    )

    name: str = Field(min_length=1, max_length=128)
    """Name other settings refer to (`summarization.model_name`, request `model_name`)."""
    use: str = "langchain_openai:ChatOpenAI"
    """Import path `module:Class` of a `BaseChatModel` subclass."""
    display_name: str | None = None
    """Label for user interfaces; not passed to the model."""
    context_window: int | None = Field(default=None, gt=0)
    """Total input capacity in tokens; feeds fraction triggers and the budget invariant."""
    tokenizer: str | None = None
    """`null` for the script-aware estimate, or an exact offline tokenizer name."""

    @field_validator("use")
    @classmethod
    def _check_use(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"must look like 'package.module:ClassName', got {value!r}")
        return value

    @field_validator("tokenizer")
    @classmethod
    def _check_tokenizer(cls, value: str | None) -> str | None:
        if value is not None and value not in KNOWN_TOKENIZERS:
            raise ValueError(
                f"unknown tokenizer {value!r}; use null or one of {', '.join(KNOWN_TOKENIZERS)}"
            )
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if value == BUILTIN_EXTRACTIVE:
            raise ValueError(
                f"{BUILTIN_EXTRACTIVE!r} is the built-in summarizer; pick another name"
            )
        return value

    @property
    def options(self) -> dict[str, Any]:
        """Keyword options for the model class (every key foldwise does not own)."""
        return dict(self.model_extra or {})


class ToolConfig(_Strict):
    """An extra tool loaded by import path."""

    use: str
    """`module:attr` naming a `BaseTool` instance or a `@tool` function."""

    @field_validator("use")
    @classmethod
    def _check_use(cls, value: str) -> str:
        return ModelConfig._check_use(value)


class PreserveHumanConfig(_Strict):
    """How human messages in the summarized span are kept verbatim."""

    mode: Literal["all", "latest", "none"] = "all"
    """`all`: every human message stays verbatim; `latest`: only the latest; `none`: summarize."""
    max_tokens: int = Field(default=20000, gt=0)
    """Above this, the oldest preserved human messages are offloaded verbatim, not paraphrased."""


class SummarizationConfig(_Strict):
    """When and how history is compacted (accepts DeerFlow's `summarization:` block)."""

    enabled: bool = True
    """When false there is no automatic compaction and manual compaction is refused."""
    model_name: str | None = None
    """Summary model tried first; `null` summarizes with the run's own model."""
    fallback: str | None = BUILTIN_EXTRACTIVE
    """Last-resort summarizer when every model fails; `null` disables it."""
    trigger: list[ContextSize] | None = Field(
        default_factory=lambda: [ContextSize(type="tokens", value=32000)]
    )
    """Clauses OR'ed together; one clause or a list. `null` means never compact automatically."""
    keep: ContextSize = DEFAULT_KEEP
    """How much recent history is kept verbatim after a compaction; below every trigger clause."""
    trim_tokens_to_summarize: int | None = Field(default=15564, gt=0)
    """Token budget of the summarizer input; `null` really disables trimming."""
    summary_prompt: str | None = None
    """Custom prompt; must contain `{messages}`; other braces are literal text."""
    timeout_seconds: float = Field(default=120.0, gt=0)
    """Timeout of one summarizer call."""
    preserve_human: PreserveHumanConfig = PreserveHumanConfig()
    """Verbatim preservation of the user's own words."""
    reserved_output_tokens: int = Field(default=4096, ge=0)
    """Budget invariant: a request may use at most `context_window` minus this (less than it)."""
    min_gain_tokens: int = Field(default=1000, ge=0)
    """Anti-thrash: skip a triggered compaction that would free fewer tokens than this."""
    max_compactions_per_run: int = Field(default=3, ge=0)
    """Anti-thrash: after this many in one run only the budget invariant may compact."""
    fallback_after_failures: int = Field(default=2, ge=1)
    """After this many consecutive failed summaries go straight to `fallback`."""
    presummarize_at: float | None = None
    """Share of the trigger (e.g. `0.8`) at which the next compaction's summary is started in
    the background on async runs, so the compacting turn does not wait for it; in (0, 1);
    `0` or `null` disables it (docs/compaction.md)."""
    skill_file_read_tool_names: list[str] = Field(
        default_factory=lambda: ["read_file", "read", "view", "cat"]
    )
    """Tool names whose reads of `SKILL.md` are recorded in the durable skill channel."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_and_shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in LEGACY_SUMMARIZATION_KEYS:
            if key in data:
                data.pop(key)
                warnings.warn(
                    f"summarization.{key} is no longer read (the durable skill channel "
                    "replaced skill rescue); remove it",
                    stacklevel=2,
                )
        trigger = data.get("trigger")
        if isinstance(trigger, dict):
            data["trigger"] = [trigger]
        return data

    @field_validator("presummarize_at", mode="before")
    @classmethod
    def _check_presummarize_at(cls, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ValueError(f"must be a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number, got {value!r}")
        if value == 0:
            return None
        if not 0 < value < 1:
            raise ValueError(
                f"must be in (0, 1), or 0 / null to disable, got {value}; write 0.8 for 80%"
            )
        return float(value)

    @field_validator("summary_prompt")
    @classmethod
    def _check_prompt(cls, value: str | None) -> str | None:
        if value is not None and "{messages}" not in value:
            raise ValueError("must contain the placeholder {messages}")
        return value


class OffloadConfig(_Strict):
    """Storing oversized tool output and pasted input outside the context."""

    enabled: bool = True
    """Master switch for offloading."""
    tool_token_limit: int = Field(default=5000, ge=0)
    """Tool results above this many tokens are stored (`0` disables); > `preview_chars` + 500."""
    human_token_limit: int = Field(default=50000, ge=0)
    """Pasted user input above this is stored, previewed (`0` disables); > `preview_chars` + 500."""
    exempt_tools: list[str] = Field(default_factory=lambda: ["read_offloaded", "search_offloaded"])
    """Tools whose results are never offloaded."""
    root: str = ".foldwise/artifacts"
    """Filesystem store root; one folder per thread below it."""
    archive_compacted: bool = True
    """Store each compacted span verbatim as an artifact the model can read and search."""
    preview_chars: int = Field(default=4000, ge=200)
    """Size of the head-and-tail preview left in the context."""
    max_bytes_per_thread: int = Field(default=256 * 1024 * 1024, gt=0)
    """Per-thread quota; the oldest artifacts go first when it is exceeded."""
    max_age_days: float | None = Field(default=30.0, gt=0)
    """Artifacts older than this are removed by garbage collection; `null` keeps them."""


class SkillsConfig(_Strict):
    """Where skills live inside the agent's sandbox."""

    container_path: str = "/mnt/skills"
    """Root under which `SKILL.md` reads are recognised."""


class StorageConfig(_Strict):
    """Where threads, transcripts and receipts are stored."""

    url: str = "sqlite:///.foldwise/foldwise.db"
    """`sqlite:///path`, `postgresql://user@host/db`, or `memory://`."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        scheme, sep, _rest = value.partition("://")
        if not sep or scheme not in STORAGE_SCHEMES:
            raise ValueError(
                f"unknown storage URL {value!r}; use sqlite:///path, "
                "postgresql://user@host/db or memory://"
            )
        return value

    @property
    def scheme(self) -> str:
        """The URL scheme, with `postgres` normalised to `postgresql`."""
        scheme = self.url.partition("://")[0]
        return "postgresql" if scheme == "postgres" else scheme


class ApiKeyConfig(_Strict):
    """One API key of the gateway and the identity it authenticates as."""

    key: SecretStr
    """The secret, sent as `x-api-key` or `Authorization: Bearer`; write `$ENV_VAR` here."""
    user: str = Field(min_length=1, max_length=256)
    """The identity the key authenticates as: it owns the threads created with the key."""

    @field_validator("key")
    @classmethod
    def _not_empty(cls, key: SecretStr) -> SecretStr:
        if not key.get_secret_value().strip():
            raise ValueError("must not be empty (an unset $VAR is an error, not an open door)")
        return key


class GatewayAuthConfig(_Strict):
    """Who may call the gateway; without keys or an authenticator everyone is one local user."""

    api_keys: list[ApiKeyConfig] = Field(default_factory=list)
    """Keys mapped to identities; each identity sees only its own threads."""
    authenticator: str | None = None
    """`pkg.module:callable` taking the request, returning an identity or `None` (JWT/OIDC)."""

    @field_validator("api_keys")
    @classmethod
    def _unique_keys(cls, keys: list[ApiKeyConfig]) -> list[ApiKeyConfig]:
        seen: set[str] = set()
        for i, entry in enumerate(keys):
            if entry.key.get_secret_value() in seen:
                # The message names the position, never the secret.
                raise ValueError(f"entry {i} repeats an earlier key (each key maps to one user)")
            seen.add(entry.key.get_secret_value())
        return keys

    @field_validator("authenticator")
    @classmethod
    def _import_path(cls, path: str | None) -> str | None:
        if path is not None and not re.fullmatch(r"[\w.]+:[\w.]+", path):
            raise ValueError(f"expected 'package.module:callable', got {path!r}")
        return path

    @property
    def enabled(self) -> bool:
        """Whether requests must authenticate (keys or an authenticator are configured)."""
        return bool(self.api_keys) or self.authenticator is not None


class GatewayConfig(_Strict):
    """The HTTP gateway."""

    host: str = "127.0.0.1"
    """Interface to bind; loopback by default."""
    port: int = Field(default=8420, ge=1, le=65535)
    """TCP port."""
    max_body_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    """Requests with a larger body get 413 before parsing."""
    cors_origins: list[str] = Field(default_factory=list)
    """Browser origins allowed by CORS, e.g. `http://localhost:3000`; empty: CORS off."""
    allowed_hosts: list[str] | None = None
    """Accepted `Host` names (`*.example.com`, `*` for any); default: loopback and the bind host."""
    auth: GatewayAuthConfig = GatewayAuthConfig()
    """API keys or an authenticator; without them, one local identity (bind loopback only)."""
    lease_ttl_seconds: float = Field(default=30.0, ge=1, le=3600)
    """Seconds a thread lease lasts without renewal (renewed every third): how long the threads
    of a worker that died stay blocked."""


class FoldwiseConfig(_Strict):
    """The whole `foldwise.yaml`."""

    models: list[ModelConfig] = Field(default_factory=list)
    """Chat models; the first is the default run model."""
    tools: list[ToolConfig] = Field(default_factory=list)
    """Extra tools by import path."""
    summarization: SummarizationConfig = SummarizationConfig()
    """Compaction settings."""
    offload: OffloadConfig = OffloadConfig()
    """Offload settings."""
    skills: SkillsConfig = SkillsConfig()
    """Skill settings."""
    storage: StorageConfig = StorageConfig()
    """Storage settings."""
    gateway: GatewayConfig = GatewayConfig()
    """Gateway settings."""
    memory: MemoryConfig = MemoryConfig()
    """Long-term memory across threads."""

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        # A section whose keys are all commented out parses as null: treat it as the defaults.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="after")
    def _cross_check(self) -> FoldwiseConfig:
        seen: set[str] = set()
        for i, model in enumerate(self.models):
            if model.name in seen:
                raise ValueError(f"models[{i}].name: duplicate model name {model.name!r}")
            seen.add(model.name)
        known = [*seen, BUILTIN_EXTRACTIVE]
        for key in ("model_name", "fallback"):
            name = getattr(self.summarization, key)
            if name is not None and name not in known:
                raise ValueError(
                    f"summarization.{key}: {name!r} names no configured model "
                    f"(known: {', '.join(known)})"
                )
        check_budget(self)
        check_keep_below_trigger(self)
        check_offload(self)
        return self

    def model(self, name: str | None = None) -> ModelConfig | None:
        """Return the model entry called `name`, or the default (first) one for `None`."""
        if name is None:
            return self.models[0] if self.models else None
        return next((m for m in self.models if m.name == name), None)

    @property
    def model_names(self) -> list[str]:
        """Configured model names, default first."""
        return [m.name for m in self.models]
