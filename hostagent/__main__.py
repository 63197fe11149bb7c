"""``python -m hostagent`` is ``echelon-agent``."""

import sys

from hostagent.agent import main

sys.exit(main())
