"""naiad-backend-python: runs Triton Python-backend `model.py` files.

The model-side API is `naiad_backend_python.utils` (also importable as Triton's
`triton_python_backend_utils`). Nothing here imports naiad's server side, so the model
process needs only numpy; the backend classes live in `naiad_backend_python.backend`.
"""

from __future__ import annotations

__all__: list[str] = []
