"""Trace samples shipped with the package (see ``data/README.md`` for their source and licence)."""

from __future__ import annotations

import os

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

#: 2,000 jobs of Microsoft's Philly trace (CC BY 4.0), in the simulator's CSV schema.
PHILLY_DEV = os.path.join(DATA_DIR, "philly-dev.csv")
