"""Model repositories: local directories (`local`), object stores through fsspec
(`remote`), poll mode (`poller`) and model files sent with a load request
(`uploaded_models`)."""

from .local import LocalRepository
from .remote import is_remote

__all__ = ["LocalRepository", "is_remote"]
