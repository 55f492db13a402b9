"""Configuration: pydantic models for `foldwise.yaml` and its loader."""

from foldwise.config._loader import (
    CONFIG_ENV_VAR,
    DEFAULT_CONFIG_PATH,
    interpolate,
    load_config,
    parse_config,
)
from foldwise.config._models import (
    BUILTIN_EXTRACTIVE,
    DEFAULT_KEEP,
    ContextSize,
    FoldwiseConfig,
    GatewayConfig,
    MemoryConfig,
    ModelConfig,
    OffloadConfig,
    PreserveHumanConfig,
    SkillsConfig,
    StorageConfig,
    SummarizationConfig,
    ToolConfig,
)

__all__ = [
    "BUILTIN_EXTRACTIVE",
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_KEEP",
    "ContextSize",
    "FoldwiseConfig",
    "GatewayConfig",
    "MemoryConfig",
    "ModelConfig",
    "OffloadConfig",
    "PreserveHumanConfig",
    "SkillsConfig",
    "StorageConfig",
    "SummarizationConfig",
    "ToolConfig",
    "interpolate",
    "load_config",
    "parse_config",
]
