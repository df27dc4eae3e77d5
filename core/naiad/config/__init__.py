"""Model configuration: `config.pbtxt` parsed into Triton's `ModelConfig` message and
validated once into the typed `ModelConfig` view (`model_config`), the defaults Triton
fills in at load (`defaults`), the fields naiad parses without acting on (`unacted`), and
every tensor a backend exchanges with its model (`model_io`)."""

from .model_config import ConfigError, ModelConfig, TensorSpec, parse_config_text, validate_config

__all__ = ["ConfigError", "ModelConfig", "TensorSpec", "parse_config_text", "validate_config"]
