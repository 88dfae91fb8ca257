"""The pure job lifecycle (``hive_lab_server.jobs.lifecycle``) under random interleavings of every event,
crashes (a restart replays the stored facts through the same machine) and store failures at any point.

A small deterministic world drives it: an in-memory store that can fail its commits, a fake launcher
that keeps exit records until they are acknowledged (like the real ones), a GPU pool standing in for the
core, and a logical clock. The shell here runs effects the way ``HiveService`` does: one unit of work per
batch of facts, post-commit effects only after the commit, facts kept for the next unit when it fails.
"""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.wire.states import Intent, JobState

S = JobState
GPUS = 4


CHECKPOINTED = (Intent.PAUSE, Intent.MIGRATE, Intent.RESIZE)


class StoreDown(Exception):
    pass


class World:
    def __init__(self):
        self.stored: dict[str, m.Job] = {}  # the store: survives crashes
        self.store_up = True
        self.mem: dict[str, m.Job] = {}  # the service's memory: lost on a crash
        self.facts: list[tuple[str, object]] = []  # facts not yet committed (memory)
        self.core_held: dict[str, int] = {}  # the "core": job -> GPUs held
        self.core_queue: list[str] = []
        self.need = {}
        self.live: dict[str, set[str]] = {}  # the launcher: job -> running tasks
        self.unacked: list[tuple[str, str, int | None]] = []  # exit records kept until acknowledged
        self.starts = collections.Counter()  # (job, attempt) launches
        self.acked_submits: set[str] = set()
        self.acked_cancels: set[str] = set()
        self.stops: list[tuple[str, int]] = []
        self.launches: list[tuple[str, int]] = []
        self.seq = 0
        self.restarts = collections.Counter()  # attempts ended by a pause, migration or resize (no retry)

    # --- the shell ---------------------------------------------------------------------------
    def unit(self, facts, request=False):
        """Apply facts (job_id, event) in one unit of work. A failed commit changes nothing; facts that
        are not requests stay queued for the next unit. Returns False when the commit failed."""
        batch = self.facts + list(facts)
        new = dict(self.mem)
        post = []
        restarts = collections.Counter()
        for job_id, ev in batch:
            job = new.get(job_id)
            if job is None:
                continue
            before = job
            job, effects = m.step(job, ev)
            new[job_id] = job
            post += [(job_id, e) for e in effects]
            if before.intent in CHECKPOINTED and job.intent is None and not job.final:
                restarts[job_id] += 1
        if not self.store_up:
            if not request:
                self.facts = batch
            return False
        for job_id, job in new.items():
            if any(jid == job_id and isinstance(e, m.Record) for jid, e in post) or job_id not in self.stored:
                self.stored[job_id] = job
        self.facts = []
        self.mem = new
        self.restarts.update(restarts)
        acked = [f for f in batch if isinstance(f[1], m.Exit)]
        self.unacked = [u for u in self.unacked if (u[0], m.Exit(u[1], u[2])) not in acked]
        for job_id, e in post:
            self.run_effect(job_id, e)
        return True

    def run_effect(self, job_id, e):
        if isinstance(e, m.Core):
            if e.call in ("finish",):
                self.core_held.pop(job_id, None)
                if job_id in self.core_queue:
                    self.core_queue.remove(job_id)
            elif e.call == "preemption_done":
                self.core_held.pop(job_id, None)
                if e.requeue:
                    self.core_queue.append(job_id)
            elif e.call in ("requeue", "submit"):
                self.core_held.pop(job_id, None)
                if job_id not in self.core_queue:
                    self.core_queue.append(job_id)
            elif e.call == "adopt":
                self.core_held[job_id] = self.need[job_id]
        elif isinstance(e, m.Start):
            self.launches.append((job_id, e.attempt))
        elif isinstance(e, m.StopTasks):
            self.stops.append((job_id, e.attempt))

    def schedule(self):
        free = GPUS - sum(self.core_held.values())
        facts = []
        for job_id in list(self.core_queue):
            if self.need[job_id] <= free:
                free -= self.need[job_id]
                self.core_queue.remove(job_id)
                self.core_held[job_id] = self.need[job_id]
                facts.append((job_id, m.Placed((f"{job_id}-t0", f"{job_id}-t1"))))
        if facts and not self.unit(facts):
            # the facts are queued; the core keeps them (it already decided)
            pass

    # --- requests ------------------------------------------------------------------------------
    def submit(self, gpus, retries):
        self.seq += 1
        job_id = f"j{self.seq}"
        job = m.Job(job_id, max_retries=retries)
        if not self.store_up:
            return None  # 503: nothing stored, nothing in the core
        self.stored[job_id] = job
        self.mem[job_id] = job
        self.need[job_id] = gpus
        self.acked_submits.add(job_id)
        self.core_queue.append(job_id)
        self.unit([(job_id, m.Queued())])
        return job_id

    def cancel(self, job_id):
        job = self.mem.get(job_id)
        if job is None or job.final:
            return
        if self.unit([(job_id, m.Cancel("ann"))], request=True):
            self.acked_cancels.add(job_id)

    # --- the launcher ----------------------------------------------------------------------------
    def launch_one(self, i):
        pending = [x for x in self.launches]
        if not pending:
            return
        job_id, attempt = pending[i % len(pending)]
        self.launches.remove((job_id, attempt))
        job = self.mem.get(job_id)
        if job is None:
            return
        nxt, _ = m.step(job, m.LaunchBegin(attempt))
        if not nxt.launched or job.launched:
            return
        self.mem[job_id] = nxt  # in memory only: a crash before the start forgets it (nothing ran)
        self.starts[(job_id, attempt)] += 1
        self.live[job_id] = set(nxt.tasks)
        self.unit([(job_id, m.LaunchStarted(attempt))])

    def exit_one(self, i, code):
        tasks = sorted((j, t) for j, ts in self.live.items() for t in ts)
        if not tasks:
            return
        job_id, task = tasks[i % len(tasks)]
        self.live[job_id].discard(task)
        self.unacked.append((job_id, task, code))

    def poll(self):
        facts = [(j, m.Exit(t, c)) for j, t, c in self.unacked if (j, m.Exit(t, c)) not in self.facts]
        if facts:
            self.unit(facts)

    def stop_one(self, i, exits_first=True):
        """The launcher's stop returns once the tasks are gone; their exits may be reported before or
        after the service hears that the stop is over."""
        if not self.stops:
            return
        job_id, attempt = self.stops.pop(i % len(self.stops))
        for task in sorted(self.live.get(job_id, ())):
            self.unacked.append((job_id, task, 137))
        self.live[job_id] = set()
        if exits_first:
            self.poll()
        self.unit([(job_id, m.Stopped(attempt))])

    def pause_one(self, i):
        ids = sorted(j for j, job in self.mem.items() if not job.final)
        if ids:
            self.unit([(ids[i % len(ids)], m.Pause("round 1"))], request=True)

    def resume_one(self, i):
        ids = sorted(j for j, job in self.mem.items() if job.state is S.PAUSED)
        if ids:
            self.unit([(ids[i % len(ids)], m.Resume("round 2"))], request=True)

    def move_one(self, i, kind):
        ids = sorted(j for j, job in self.mem.items() if not job.final)
        if ids:
            self.unit([(ids[i % len(ids)], m.Move(kind, "k80 -> v100"))], request=True)

    def preempt_one(self, i):
        placed = sorted(j for j, job in self.mem.items() if job.holds_gpus)
        if placed:
            self.unit([(placed[i % len(placed)], m.Preempt("hi"))])

    # --- crash and restart ---------------------------------------------------------------------
    def crash_and_recover(self):
        self.mem, self.facts, self.launches, self.stops = {}, [], [], []
        self.core_held, self.core_queue = {}, []
        live = {j: frozenset(t) for j, t in self.live.items() if t}
        facts = []
        for job_id, job in sorted(self.stored.items(), key=lambda kv: int(kv[0][1:])):
            if job.final:
                continue
            self.mem[job_id] = replace(job, launched=False)
            ended = frozenset(t for j, t, _ in self.unacked if j == job_id)  # exit records kept until acked
            facts.append((job_id, m.Recovered(live.get(job_id, frozenset()), ended)))
        for job_id in live:  # orphans of finished jobs are stopped
            if job_id not in self.mem or self.stored[job_id].final:
                self.live[job_id] = set()
        if not self.unit(facts):
            return False
        self.poll()
        lost = []
        for job_id, job in self.mem.items():
            if job.state is S.RUNNING and job.intent is None:
                for t in sorted(job.left - self.live.get(job_id, set())):
                    if not any(u[0] == job_id and u[1] == t for u in self.unacked):
                        lost.append((job_id, m.Exit(t, None, "not running after the server restarted")))
        if lost:
            self.unit(lost)
        return True

    def settle(self):
        """Faults stop; everything runs to its end."""
        self.store_up = True
        if not self.mem and self.stored:
            self.crash_and_recover()
        for _ in range(400):
            self.unit([(j, m.Resume("settle")) for j, job in sorted(self.mem.items()) if job.state is S.PAUSED])
            self.schedule()
            self.poll()
            if self.launches:
                self.launch_one(0)
            elif self.stops:
                self.stop_one(0)
            elif any(self.live.values()):
                self.exit_one(0, 0)
            elif all(j.final for j in self.mem.values()) and not self.facts and not self.unacked:
                break


# the lifecycle's own events come often; crashes and store faults now and then (at any point)
ACTIONS = st.one_of(
    st.tuples(st.just("submit"), st.integers(1, 4), st.integers(0, 2)),
    st.tuples(st.just("schedule")),
    st.tuples(st.just("launch"), st.integers(0, 50)),
    st.tuples(st.just("launch"), st.integers(0, 50)),
    st.tuples(st.just("exit"), st.integers(0, 50), st.sampled_from([0, 1, None])),
    st.tuples(st.just("stop"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("schedule")),
    st.tuples(st.just("launch"), st.integers(0, 50)),
    st.tuples(st.just("exit"), st.integers(0, 50), st.sampled_from([0, 1, None])),
    st.tuples(st.just("poll")),
    st.tuples(st.just("stop"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("preempt"), st.integers(0, 50)),
    st.tuples(st.just("pause"), st.integers(0, 50)),
    st.tuples(st.just("resume"), st.integers(0, 50)),
    st.tuples(st.just("move"), st.integers(0, 50), st.sampled_from(["migrate", "resize"])),
    st.tuples(st.just("crash")),
    st.tuples(st.just("store_down")),
    st.tuples(st.just("store_up")),
)


def run(world, actions):
    for a in actions:
        kind = a[0]
        if kind == "submit":
            world.submit(a[1], a[2])
        elif kind == "cancel":
            ids = sorted(world.mem)
            if ids:
                world.cancel(ids[a[1] % len(ids)])
        elif kind == "schedule":
            world.schedule()
        elif kind == "launch":
            world.launch_one(a[1])
        elif kind == "exit":
            world.exit_one(a[1], a[2])
        elif kind == "poll":
            world.poll()
        elif kind == "stop":
            world.stop_one(a[1], a[2])
        elif kind == "preempt":
            world.preempt_one(a[1])
        elif kind == "pause":
            world.pause_one(a[1])
        elif kind == "resume":
            world.resume_one(a[1])
        elif kind == "move":
            world.move_one(a[1], a[2])
        elif kind == "crash":
            world.crash_and_recover()
        elif kind == "store_down":
            world.store_up = False
        elif kind == "store_up":
            world.store_up = True
        check_safety(world)
    world.settle()


def check_safety(world):
    # no acknowledged job lost
    assert world.acked_submits <= set(world.stored)
    # no GPU held by a finished job, in the core or by a running task
    for job_id in world.core_held:
        assert not world.stored[job_id].final or job_id not in world.mem or not world.mem[job_id].final, job_id
    for job_id, tasks in world.live.items():
        if tasks and job_id in world.mem:
            assert not world.mem[job_id].final, (job_id, world.mem[job_id])
    # GPUs never over-committed
    assert sum(world.core_held.values()) <= GPUS
    # a paused job holds no GPU, runs no task and is not in the core's queue (it waits for a resume)
    for job_id, job in world.mem.items():
        if job.state is S.PAUSED and not world.facts:
            assert job_id not in world.core_held and job_id not in world.core_queue, (job_id, job)
            assert not world.live.get(job_id), (job_id, job)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=10, max_size=80))
def test_random_interleavings_with_crashes_and_store_failures(actions):
    world = World()
    run(world, actions)
    check_safety(world)
    for job_id in world.acked_submits:
        job = world.stored[job_id]
        assert job.final, (job_id, job, world.facts)  # every job reaches a final state
        started = sum(n for (j, _), n in world.starts.items() if j == job_id)
        assert all(n == 1 for (j, _), n in world.starts.items() if j == job_id)  # an attempt runs once
        # a retry is recorded for every started attempt but the one that ended the job (if it started):
        # no task runs twice without a recorded retry, and attempts that never started cost none
        # (pauses, migrations and resizes restart an attempt without a retry)
        assert job.retries == started - world.restarts[job_id] - (1 if job.launched else 0), (job, started)
    for job_id in world.acked_cancels:  # an acknowledged cancel is never lost
        assert world.stored[job_id].state is S.CANCELLED, (job_id, world.stored[job_id])
    assert not world.core_held  # no GPU held once everything ended
    assert not any(world.live.values())


# --- single rows of the table, spelled out --------------------------------------------------------

def placed(job_id="j", tasks=("t0",), retries=0):
    job, _ = m.step(m.Job(job_id, max_retries=retries), m.Queued())
    job, effects = m.step(job, m.Placed(tasks))
    return job, effects


def test_preempted_after_placement_before_launch_costs_no_retry_and_leaves_no_stale_exits():
    """Defect 1: placed and preempted in one step; the next attempt's real exit is honoured."""
    job, _ = placed(retries=3)
    job, effects = m.step(job, m.Preempt("H"))
    assert job.state is S.QUEUED and job.retries == 0 and job.stale == frozenset()
    assert m.Core("preemption_done", requeue=True) in effects and not any(isinstance(e, m.StopTasks) for e in effects)
    job, _ = m.step(job, m.Placed(("t0",)))
    job, _ = m.step(job, m.LaunchBegin(job.attempt))
    job, _ = m.step(job, m.LaunchStarted(job.attempt))
    job, effects = m.step(job, m.Exit("t0", 0))
    assert job.state is S.SUCCEEDED and m.Core("finish") in effects


def test_launch_that_starts_after_a_preemption_never_runs():
    job, _ = placed(retries=1)
    attempt = job.attempt
    job, _ = m.step(job, m.Preempt("H"))
    job, _ = m.step(job, m.LaunchBegin(attempt))
    assert not job.launched and job.state is S.QUEUED


def test_cancel_while_running_stores_the_intent_before_stopping():
    job, _ = placed()
    job, _ = m.step(job, m.LaunchBegin(1))
    job, _ = m.step(job, m.LaunchStarted(1))
    job, effects = m.step(job, m.Cancel("ann"))
    assert job.intent is Intent.CANCEL
    assert isinstance(effects[0], m.Record) and effects[0].fields["stop_intent"] == "cancel"
    assert isinstance(effects[1], m.StopTasks)
    # the task ends on its own meanwhile: still cancelled (the user was told so)
    job, _ = m.step(job, m.Exit("t0", 0))
    job, effects = m.step(job, m.Stopped(1))
    assert job.state is S.CANCELLED


def test_recovered_cancel_intent_is_finished_not_adopted_as_running():
    """Defect 2 at the machine's level: the stored intent survives the restart."""
    stored = m.Job("j", state=S.RUNNING, attempt=1, tasks=("t0",), intent=Intent.CANCEL, intent_reason="cancelled by ann")
    job, effects = m.step(stored, m.Recovered(frozenset({"t0"})))
    assert job.intent is Intent.CANCEL and any(isinstance(e, m.StopTasks) for e in effects)
    job, _ = m.step(job, m.Exit("t0", 0))
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.CANCELLED


def test_gang_failure_stops_the_others_then_fails():
    job, _ = placed(tasks=("a", "b"))
    job, _ = m.step(job, m.LaunchBegin(1))
    job, _ = m.step(job, m.LaunchStarted(1))
    job, effects = m.step(job, m.Exit("a", 3))
    assert job.intent is Intent.FAIL and any(isinstance(e, m.StopTasks) for e in effects)
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.FAILED and job.exit_code == 3 and "b" in job.stale
    job2, _ = m.step(job, m.Exit("b", 137))
    assert job2 == job  # final: nothing changes


@pytest.mark.parametrize("retries,expect", [(1, S.QUEUED), (0, S.FAILED)])
def test_lost_task_is_retried_while_retries_remain(retries, expect):
    job, _ = placed(retries=retries)
    job, _ = m.step(job, m.LaunchBegin(1))
    job, _ = m.step(job, m.LaunchStarted(1))
    job, _ = m.step(job, m.Exit("t0", None))
    assert job.state is expect and job.retries == retries


def test_an_attempt_that_ran_while_the_store_was_down_is_not_run_again_after_a_crash():
    """Found by the property test: placed, the store refuses writes, the tasks start and exit, the
    server crashes. The store still says ``scheduled`` (never launched), but the launcher kept the exit
    records: recovery must take them as the attempt's end, not start it again without a retry."""
    world = World()
    run(world, [("submit", 1, 0), ("schedule",), ("store_down",), ("launch", 0), ("exit", 0, 0),
                ("exit", 0, 0), ("crash",)])
    [job_id] = world.acked_submits
    job = world.stored[job_id]
    assert job.state is S.SUCCEEDED and job.retries == 0, job
    assert sum(n for (j, _), n in world.starts.items() if j == job_id) == 1


# --- issue 17: pause, resume, migrate, resize --------------------------------------------------

def running(retries=0):
    job, _ = placed(retries=retries)
    job, _ = m.step(job, m.LaunchBegin(job.attempt))
    job, _ = m.step(job, m.LaunchStarted(job.attempt))
    return job


def test_pause_of_a_running_job_checkpoints_then_pauses_without_a_retry():
    job, effects = m.step(running(), m.Pause("round 3 of max_min_fairness_perf"))
    assert job.state is S.RUNNING and job.intent is Intent.PAUSE
    assert m.StopTasks(1, "stop", True) in effects  # the checkpoint signal first
    job, effects = m.step(job, m.Exit("t0", 0))  # it saved and exited: remembered, not a success
    assert job.state is S.RUNNING and effects == []
    job, effects = m.step(job, m.Stopped(1))
    assert job.state is S.PAUSED and job.retries == 0
    assert m.Core("finish") in effects and m.SetPlacement(clear=True) in effects
    assert any(isinstance(e, m.Record) and e.reason == "paused: round 3 of max_min_fairness_perf" for e in effects)
    job, effects = m.step(job, m.Placed(("t0",)))  # a paused job is not placed
    assert job.state is S.PAUSED and effects == []
    job, effects = m.step(job, m.Resume("round 4"))
    assert job.state is S.QUEUED and m.Core("submit") in effects


def test_cancel_stops_without_the_checkpoint_signal_and_preemption_with_it():
    _, effects = m.step(running(), m.Cancel("ann"))
    assert m.StopTasks(1, "stop", False) in effects
    _, effects = m.step(running(), m.Preempt("H"))
    assert m.StopTasks(1, "preempt", True) in effects


@pytest.mark.parametrize("kind,word", [("migrate", "migrated"), ("resize", "resized")])
def test_migrate_and_resize_requeue_with_the_new_request_without_a_retry(kind, word):
    job, effects = m.step(running(), m.Move(kind, "k80 -> v100: faster type"))
    assert job.intent is (Intent.MIGRATE if kind == "migrate" else Intent.RESIZE)
    assert m.StopTasks(1, "stop", True) in effects
    job, effects = m.step(job, m.Stopped(1))
    assert job.state is S.QUEUED and job.retries == 0 and m.Core("requeue") in effects
    assert any(isinstance(e, m.Record) and e.reason == f"{word} k80 -> v100: faster type" for e in effects)
    # queued: requeued at once, nothing to stop
    job, effects = m.step(job, m.Move(kind, "again"))
    assert job.state is S.QUEUED and m.Core("requeue") in effects and not any(isinstance(e, m.StopTasks) for e in effects)


def test_a_paused_job_is_not_adopted_after_a_restart_and_can_be_cancelled():
    job, _ = m.step(running(), m.Pause("x"))
    job, _ = m.step(job, m.Stopped(1))
    same, effects = m.step(job, m.Recovered(frozenset()))
    assert same.state is S.PAUSED and effects == []
    job, effects = m.step(job, m.Cancel("ann"))
    assert job.state is S.CANCELLED


def test_overflowed_job_preempted_yields_without_a_retry_and_may_run_again():
    """Issue 12: an overflowed job (running in idle GPUs outside its VC) preempted with no retries left
    is queued again (intent yield, checkpointed stop), not failed; a plain preemption still fails it."""
    for overflow, state in ((True, S.QUEUED), (False, S.FAILED)):
        job, _ = placed(retries=0)
        job, _ = m.step(job, m.LaunchBegin(1))
        job, _ = m.step(job, m.LaunchStarted(1))
        job, effects = m.step(job, m.Preempt("H", overflow=overflow))
        assert job.intent is (Intent.YIELD if overflow else Intent.PREEMPT)
        assert effects[0].fields["stop_intent"] == job.intent.value
        stop = next(e for e in effects if isinstance(e, m.StopTasks))
        assert stop.checkpoint
        job, _ = m.step(job, m.Exit("t0", None))
        job, effects = m.step(job, m.Stopped(1))
        assert job.state is state and job.retries == 0
        if overflow:
            assert m.Core("preemption_done", requeue=True) in effects and "no retry used" in job.reason


def test_a_gang_whose_launch_a_crash_cut_is_stopped_and_queued_again_never_adopted_in_part():
    """Issue 24: killed in the middle of an 8-task gang's launch, recovery found 1 task. It must not adopt
    it as the whole job (it ended "succeeded: all 8 tasks exited with code 0"): the started tasks are
    stopped and the job queued again, no retry used."""
    tasks = tuple(f"w-{i}" for i in range(8))
    stored = m.Job("j", state=S.SCHEDULED, attempt=1, tasks=tasks, left=frozenset(tasks), max_retries=0)
    job, effects = m.step(stored, m.Recovered(frozenset({"w-0"})))
    assert job.intent is Intent.RELAUNCH and "7 of 8 tasks never started" in job.intent_reason
    assert any(isinstance(e, m.StopTasks) for e in effects)
    job, _ = m.step(job, m.Exit("w-0", 0))  # its one task ends (stopped, or done meanwhile): not a success
    assert job.state is not S.SUCCEEDED
    job, effects = m.step(job, m.Stopped(1))
    assert job.state is S.QUEUED and job.retries == 0 and "no retry used" in job.reason
    assert any(isinstance(e, m.Core) and e.call == "requeue" for e in effects)
    # a gang whose every task was launched before the crash is adopted whole, as before
    whole, _ = m.step(stored, m.Recovered(frozenset(tasks)))
    assert whole.state is S.RUNNING and whole.intent is None and whole.left == frozenset(tasks)
