"""``python -m vdr`` (also ``torchrun -m vdr``): the same as the ``vdr`` command."""

from .cli import entry

entry()
