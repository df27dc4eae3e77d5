"""Triton's name for the Python-backend model API, so a Triton `model.py` runs unchanged:
``import triton_python_backend_utils as pb_utils``. Everything lives in
`naiad_backend_python.model_side.pb_utils`; see docs/backends/python.md."""

# Triton's module shows its own imports too, and some models use them (pb_utils.np).
import json  # noqa: F401
import struct  # noqa: F401

import numpy as np  # noqa: F401
from naiad_backend_python.model_side.pb_utils import *  # noqa: F401,F403
from naiad_backend_python.model_side.pb_utils import __all__  # noqa: F401
