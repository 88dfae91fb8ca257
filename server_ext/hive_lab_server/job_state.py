"""The one vocabulary of job states that responses, queries, metrics and the store share.

    submitted -> queued -> scheduled -> running -> succeeded | failed | cancelled

Defined once, with the transition table, in ``lifecycle/states.py``; this module is the short import
for code that only needs the names (handlers, models, metrics, the OpenAPI document).
"""

from __future__ import annotations

from .lifecycle.states import ACTIVE_STATES, FINAL_STATES, JobState

STATE_NAMES = tuple(s.value for s in JobState)  # in lifecycle order

__all__ = ["ACTIVE_STATES", "FINAL_STATES", "JobState", "STATE_NAMES"]
