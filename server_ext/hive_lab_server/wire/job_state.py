"""The one vocabulary of job states that responses, queries, metrics, the store and the JupyterLab
panel share.

    submitted -> queued -> scheduled -> running -> succeeded | failed | cancelled

Defined once, with the transition table, in ``wire/states.py``; this module is the short import
for code that only needs the names (handlers, models, metrics, the OpenAPI document), and it writes the
TypeScript copy the panel imports (``labextension/src/jobStates.ts``, generated, never edited by hand;
``tests/server/wire/test_job_state_ts.py`` fails when the two drift):

    python -m hive_lab_server.wire.job_state labextension/src/jobStates.ts
"""

from __future__ import annotations

import sys

from hive_lab_server.wire.states import ACTIVE_STATES, FINAL_STATES, PENDING_STATES, PLACED_STATES, WAITING_STATES, JobState

STATE_NAMES = tuple(s.value for s in JobState)  # in lifecycle order

__all__ = ["ACTIVE_STATES", "FINAL_STATES", "JobState", "PENDING_STATES", "STATE_NAMES", "WAITING_STATES",
           "typescript"]

# name in TypeScript -> (the states in lifecycle order, what it means)
_SETS = {
    "ACTIVE_STATES": (ACTIVE_STATES, "not finished (the job may still hold or wait for GPUs)"),
    "FINAL_STATES": (FINAL_STATES, "finished: nothing changes any more"),
    "WAITING_STATES": (WAITING_STATES, "waits for GPUs: nothing placed yet"),
    "PENDING_STATES": (PENDING_STATES, "its tasks do not run yet (a wait reason, an estimated start)"),
    "PLACED_STATES": (PLACED_STATES, "holds GPUs"),
}


def typescript() -> str:
    """The TypeScript module of the state vocabulary (``labextension/src/jobStates.ts``)."""
    names = [s.value for s in JobState]
    lines = [
        "// Generated from hive_lab_server/wire/states.py by",
        "//   python -m hive_lab_server.wire.job_state labextension/src/jobStates.ts",
        "// Do not edit: tests/server/wire/test_job_state_ts.py fails when this file and the Python drift.",
        "",
        "export type JobState =",
        *[f"  | '{n}'" + (";" if i == len(names) - 1 else "") for i, n in enumerate(names)],
        "",
        "export const JOB_STATES: readonly JobState[] = [" + ", ".join(f"'{n}'" for n in names) + "];",
    ]
    for ts_name, (states, meaning) in _SETS.items():
        members = [s.value for s in JobState if s in set(states)]
        lines += ["", f"/** {meaning[0].upper()}{meaning[1:]}. */",
                  f"export const {ts_name}: ReadonlySet<string> = new Set<JobState>([" +
                  ", ".join(f"'{n}'" for n in members) + "]);"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover (the test compares the output)
    text = typescript()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
