"""``python -m softswitch``: see :mod:`softswitch.main`."""

import sys

from softswitch.main import main

sys.exit(main())
