"""Model configuration: `config.pbtxt` parsed into Triton's `ModelConfig` message and
validated once into the typed `ModelConfig` view (`model_config`), the defaults Triton
fills in at load (`defaults`), the fields naiad parses without acting on (`unacted`),
every tensor a backend exchanges with its model (`model_io`, `sequence_controls`), and an
ensemble's wiring checked into the plan its scheduler runs (`ensemble_validation`)."""

from .model_config import ConfigError, ModelConfig, TensorSpec, parse_config_text, validate_config

__all__ = ["ConfigError", "ModelConfig", "TensorSpec", "parse_config_text", "validate_config"]
