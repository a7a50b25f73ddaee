"""``python -m vdr`` (also ``torchrun -m vdr``): the same as the ``vdr`` command."""

import sys

from .cli import main

sys.exit(main())
