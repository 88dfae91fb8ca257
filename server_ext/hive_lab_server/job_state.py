"""The one vocabulary of job states that responses, queries, metrics and the store share.

    submitted -> queued -> scheduled -> running -> succeeded | failed | cancelled

``queued``: waiting for GPUs (the job's ``reason`` says why); ``scheduled``: placed by the core,
its tasks starting; preempted or lost jobs go back to ``queued`` while retries remain.
"""

from __future__ import annotations

import enum


class JobState(str, enum.Enum):
    SUBMITTED = "submitted"
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE_STATES = frozenset(JobState) - FINAL_STATES
STATE_NAMES = tuple(s.value for s in JobState)  # in lifecycle order
