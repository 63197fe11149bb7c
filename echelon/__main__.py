"""``python -m echelon``: the same as the ``echelon`` command."""

import sys

from echelon.cli import main

sys.exit(main())
