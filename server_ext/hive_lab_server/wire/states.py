"""The states of a job, the stop intents, and the transition table (the one place a newcomer reads).

A job is in exactly one ``JobState``. While it is being stopped it keeps its state (``scheduled`` or
``running``: its tasks may still run and hold GPUs) and carries an ``Intent`` saying why and what
follows. The intent is stored (``jobs.stop_intent``) before anyone is told, so a restart finishes the
stop instead of forgetting it.

"launched" means ``Launcher.start`` was called for the current attempt: only then can tasks run,
exits come, and a retry be counted.

=========================  =====================================  ==========================  ===========================
state (+ intent)           event                                  next state (+ intent)       effects
=========================  =====================================  ==========================  ===========================
submitted                  queued (stored, core says waiting)      queued                      write
submitted / queued         placed (core chose GPUs)               scheduled                   write placement; launch
scheduled                  launch_begin                           scheduled, launched         launcher.start
scheduled, launched        launch_started (at: clock reading)     running                     write started_at
scheduled                  launch_failed                          failed                      write; core.finish
submitted/queued/paused    cancel                                 cancelled                   write; core.finish
scheduled, not launched    cancel                                 cancelled                   write; core.finish
scheduled/running          cancel                                 same + CANCEL               write intent; stop
scheduled, not launched    preempt                                queued (no retry used)      write; core.preemption_done
scheduled/running          preempt                                same + PREEMPT              write intent; stop
scheduled/running          preempt (overflowed job, see below)    same + YIELD                write intent; stop
running                    exit 0 (last task)                     succeeded                   write; core.finish
running                    exit 0 (others left)                   running                     write task_exits
running                    exit != 0, others left                 running + FAIL              write intent; stop
running                    exit != 0, last task                   failed                      write; core.finish
running                    exit reaches a group's min_succeeded   running + SUCCEED           write intent; stop
running                    exit != 0 under the group's min_failed running / succeeded if last write task_exits
running                    exit lost, last task, retries left     queued (retry +1)           write; core.finish+submit
running                    lost (GPU failed)                      running + LOST              write intent; stop
running, past deadline     time_up (the shell's clock)            running + FAIL              write intent; stop (reason: time limit 2h reached)
any + intent               exit                                   same (code remembered)      -
+ CANCEL                   stopped                                cancelled                   write; core.finish
+ PREEMPT                  stopped, retries left                  queued (retry +1)           write; core.preemption_done
+ PREEMPT                  stopped, no retries left               failed                      write; core.preemption_done
+ YIELD                    stopped                                queued (no retry used)      write; core.preemption_done
+ FAIL                     stopped                                failed                      write; core.finish
+ SUCCEED                  stopped                                succeeded (exit code 0)     write; core.finish
+ SUCCEED                  cancel                                 unchanged (it succeeded)    -
+ LOST                     stopped, retries left / none           queued (retry +1) / failed  write; core.finish(+submit)
any                        demoted                                same                        write history note
submitted/queued           pause (the owner, an admin)            paused                      write; core.finish
scheduled, not launched    pause                                  paused                      write; core.finish
scheduled/running          pause                                  same + PAUSE                write intent; checkpoint+stop
paused                     resume                                 queued                      write; core.submit
queued / scheduled, n.l.   migrate | resize (request changed)     queued                      write; core.finish+submit
running                    migrate | resize                       same + MIGRATE | RESIZE     write intent; checkpoint+stop
paused                     migrate | resize                       paused (new request kept)   write history note
+ PAUSE                    stopped                                paused (no retry used)      write; core.finish
+ MIGRATE / RESIZE         stopped                                queued (no retry used)      write; core.finish+submit
+ PAUSE/MIGRATE/RESIZE     launch_failed                          paused / queued, as stopped write; core.finish(+submit)
any                        rejected (the core will not queue it)  failed                      write
submitted/queued/paused    dependency_never_met (depends_on)      cancelled                   write; core.finish
stored submitted/queued    recovered                              queued                      core.submit
stored paused              recovered                              paused                      -
stored + PAUSE, no tasks   recovered                              paused                      write; -
stored scheduled, no tasks recovered                              queued (no retry used)      write; core.submit
stored running/scheduled   recovered with live tasks              running (+ stored intent)   core.adopt; adopt; (stop); deadline from stored started_at
stored + CANCEL, no tasks  recovered                              cancelled                   write
stored + FAIL/SUCCEED, n.t recovered                              failed / succeeded          write
succeeded/failed/cancelled anything                               unchanged                   -
=========================  =====================================  ==========================  ===========================

"checkpoint+stop": the tasks get the checkpoint signal (SIGUSR1) and ``checkpoint_grace_s`` to save
and exit, then the usual stop (SIGTERM, the grace, SIGKILL); preemption does the same. Cancels, failed
gangs and lost tasks stop without it. See docs/checkpoint.md.

"exit" above is the default completion policy (each group: ``min_failed`` 1, ``min_succeeded`` none).
A task group may set others (OpenPAI's ``completion``): a failure under ``min_failed`` lets the other
tasks run on, and ``min_succeeded`` tasks exiting 0 end the job as succeeded, the rest being stopped.
The tasks that ended are stored (``jobs.task_exits``), so a restart neither counts them again nor
calls them lost.

``store_failure`` is not a state change: a unit of work whose commit fails leaves every job as it was;
facts (exits, launch results, core decisions) stay queued and are applied again on the next unit, and
requests (submit, cancel) are answered 503 with Retry-After, so nothing is acknowledged unstored.
"""

from __future__ import annotations

import enum


class JobState(str, enum.Enum):
    SUBMITTED = "submitted"
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PAUSED = "paused"  # stopped with a checkpoint, holds no GPUs, not in the core's queue until resumed
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in FINAL_STATES

    def __str__(self) -> str:
        return self.value


FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE_STATES = tuple(s for s in JobState if s not in FINAL_STATES)
PLACED_STATES = frozenset({JobState.SCHEDULED, JobState.RUNNING})
WAITING_STATES = frozenset({JobState.SUBMITTED, JobState.QUEUED})  # waits for GPUs: nothing placed yet
PENDING_STATES = WAITING_STATES | {JobState.SCHEDULED}  # its tasks do not run yet (a reason, an estimated start)


class Intent(str, enum.Enum):
    """Why a job is being stopped, and so what happens once its tasks are gone."""

    CANCEL = "cancel"  # -> cancelled
    PREEMPT = "preempt"  # -> queued again (a retry) or failed
    FAIL = "failed"  # a task of the gang failed -> failed
    SUCCEED = "succeed"  # its completion policy was met (min_succeeded) -> succeeded once the rest stop
    LOST = "lost"  # its GPU failed or a task vanished -> queued again (a retry) or failed
    PAUSE = "pause"  # paused (time-slicing, an admin or its owner) -> paused, no retry used
    MIGRATE = "migrate"  # moved to another GPU type -> queued again with the new request, no retry used
    RESIZE = "resize"  # an elastic job's GPU count changed -> queued again with the new request, no retry used
    YIELD = "yield"  # an overflowed job gives idle GPUs back to their VC -> queued again, no retry used
    RELAUNCH = "relaunch"  # a crash cut its launch (some tasks never started) -> queued again, no retry used

    @property
    def checkpoints(self) -> bool:
        """Its tasks get the checkpoint signal before they are stopped (they will run again)."""
        return self in (Intent.PREEMPT, Intent.YIELD, Intent.PAUSE, Intent.MIGRATE, Intent.RESIZE)

    def __str__(self) -> str:
        return self.value
