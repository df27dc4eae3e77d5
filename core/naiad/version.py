"""The version of the naiad distribution, kept apart so every layer can name it without
importing the package's public API."""

__all__ = ["__version__"]

__version__ = "0.1.0"
