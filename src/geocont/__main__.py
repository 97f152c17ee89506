"""``python -m geocont analyze ...``: the command line of :mod:`geocont.cli`."""

import sys

from .cli import main

sys.exit(main())
