"""naiad-backend-python: runs Triton Python-backend `model.py` files.

The package shows the process boundary as Triton's python_backend does (its stub against
its backend library):

- `model_side`: everything that runs in the model's process: the model API
  (`model_side.pb_utils`, importable as Triton's `triton_python_backend_utils`), the stub's
  main program, the stub template that forks it, the model host and the bridge to the
  server. It imports nothing of naiad, so a model's own virtual environment needs only
  numpy. The messages both processes exchange (framed control messages, the shared-memory
  rings that carry tensors) are `naiad_wire.interprocess`, which is as plain.
- `server_side`: the naiad backend (model, instances in a stub process or in the server,
  BLS, model control, custom metrics, settings).
"""

from __future__ import annotations

__all__: list[str] = []
