import sys
from pathlib import Path

# The metrics tests' strict Prometheus text reader.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))
