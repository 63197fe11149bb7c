"""``python -m sim``: the simulator CLI."""

import sys

from sim.cli import main

sys.exit(main())
