"""`python -m execrl.cli`: the same entry point as the `execrl` console script."""

import sys

from execrl.cli import main

sys.exit(main())
