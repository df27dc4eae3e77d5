"""Triton's name for the Python-backend model API, so a Triton `model.py` runs unchanged:
``import triton_python_backend_utils as pb_utils``. Everything lives in
`naiad_backend_python.utils`; see docs/backends/python.md."""

from naiad_backend_python.utils import *  # noqa: F401,F403
from naiad_backend_python.utils import __all__  # noqa: F401
