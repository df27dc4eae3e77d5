"""Model repositories: local directories (`local`), object stores through fsspec
(`remote`) and model files sent with a load request (`uploaded_models`). Poll mode, which
drives the model manager, is `naiad.models.poller`."""

from .local import LocalRepository
from .remote import is_remote

__all__ = ["LocalRepository", "is_remote"]
