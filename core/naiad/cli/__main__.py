"""`python -m naiad.cli`: the `naiad` command."""

import sys

from .main import main

sys.exit(main())
