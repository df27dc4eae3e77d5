import sys
from pathlib import Path

# The numpy test backend lives one directory up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
