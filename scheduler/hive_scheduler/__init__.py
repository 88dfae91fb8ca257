"""hive_scheduler: the scheduling core of hive-lab.

Pure Python and deterministic: no Jupyter, tornado or docker imports, no wall clock.
See docs/core-api.md for the contract the service, the simulator and the UIs rely on.
"""
