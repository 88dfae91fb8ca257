"""hive_lab: what users import (magics, client, widgets, CLI)."""

__version__ = "0.1.0"
