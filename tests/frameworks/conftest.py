"""Tests that serve models of every framework backend at once; the model builders live
beside them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
