"""``slurm`` launcher: hive-lab's core decides where; Slurm executes.

Each placed job becomes ONE Slurm job (a het job, one component per node, when it spans nodes),
pinned to the nodes (``--nodelist``) and GPUs the core chose (``slurm_script``). It is submitted with
the CLI (``sbatch --parsable``) or, when ``rest_url`` is set, through ``slurmrestd`` with a JWT for the
submitting user (``slurm.rest``). Slurm jobs are named ``hive-lab:<job id>`` and carry the comment
``hive-lab:<job id> instance=<server> tasks=<names>``, so ``running()`` finds them again after a
restart; each launch is also written down before ``sbatch`` and kept until the service stored its
exits (``launch_records``), so a job that ended while the server was down is reported, never run twice.
Exits come from the tasks' exit files (Slurm keeps no step exit codes without accounting) and
from Slurm's job state (preempted, node failure, time limit, cancelled). Node states are watched:
a node Slurm drains or marks down is drained in hive-lab (``service.hardware_events.set_drain``, by "slurm"), and
undrained when Slurm resumes it. Configure it in ``jupyter_server_config.py``::

    c.HiveLabApp.launcher = "slurm"
    c.SlurmLauncher.slurm_conf = "/etc/slurm/slurm.conf"   # default: SLURM_CONF or Slurm's default
    c.SlurmLauncher.partition = "gpu"
    c.SlurmLauncher.gres_mode = "auto"       # per-index | count | auto (per node, from its GRES types)
    c.SlurmLauncher.rest_url = "unix:///run/slurmrestd/rest.sock"   # optional: submit via slurmrestd
    c.SlurmLauncher.jwt_key_file = "/etc/slurm/jwt_hs256.key"       # else tokens from `scontrol token`
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import pathlib
import pwd
import time
from dataclasses import dataclass, field
from typing import Any

from traitlets import Bool, Enum, Float, Int, List, Unicode

from hive_lab_server.execution.isolation import AccountError, Isolation
from hive_lab_server.execution.isolation.accounts import resolve_account
from hive_lab_server.execution.slurm.cli import SlurmCLI, SlurmError
from hive_lab_server.execution.slurm.inventory import SlurmNode, inventory_from, parse_node
from hive_lab_server.execution.staging import private_dir
from hive_lab_server.execution.launchers.base import CHECKPOINT_SIGNAL, LaunchError, Launcher, LaunchRequest, TaskExit, TaskLaunch
from hive_lab_server.execution.launchers.launch_records import LaunchRecords
from hive_lab_server.execution.launchers.slurm_script import MISMATCH_EXIT, NAME_PREFIX, exit_file, parse_comment, plan_job

log = logging.getLogger(__name__)

__all__ = ["SlurmLauncher"]

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
# Slurm ended the job itself: tasks killed by its signals are reported with Slurm's reason
SLURM_KILLED = {"PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "TIMEOUT", "DEADLINE"}
# pending reasons Slurm will never get past for a job pinned like ours
# (ReqNodeNotAvail / NodeDown pass once a node answers again; start_timeout_s covers them)
HOPELESS = {"BadConstraints", "PartitionNodeLimit", "PartitionConfig", "InvalidAccount", "InvalidQOS",
            "PartitionDown", "PartitionInactive", "JobHeldAdmin", "QOSMaxGRESPerJob"}


@dataclass
class _Job:
    job_id: str
    slurm_id: int | None
    tasks: dict[str, TaskLaunch | None]  # task name -> launch (None when adopted without details)
    log_paths: dict[str, str]
    submitted: float = field(default_factory=time.monotonic)
    seen_running: bool = False
    stopping: bool = False
    done: set[str] = field(default_factory=set)  # tasks already reported
    signalled: dict[str, float] = field(default_factory=dict)  # task -> when its exit file showed a signal


def _state(raw: dict[str, Any]) -> str:
    s = raw.get("job_state") or ""
    if isinstance(s, list):
        s = s[0] if s else ""
    return str(s).upper()


def _exit_code(raw: dict[str, Any]) -> int | None:
    """Slurm's raw wait status (``exit_code`` 36608 = 143 << 8) -> an exit code."""
    v = raw.get("exit_code")
    if isinstance(v, dict):  # newer data_parser: {"status": ..., "return_code": ...}
        v = v.get("return_code")
        return int(v) if isinstance(v, int) else None
    if not isinstance(v, int):
        return None
    if v & 0x7F:
        return 128 + (v & 0x7F)
    return (v >> 8) & 0xFF


class SlurmLauncher(Launcher):
    name = "slurm"
    supports_images = False  # tasks run as processes on the nodes (no container runtime)

    slurm_conf = Unicode(None, allow_none=True, config=True, help="slurm.conf (default: SLURM_CONF or Slurm's default)")
    bin_dir = Unicode(None, allow_none=True, config=True, help="where sbatch, squeue, scontrol ... are (default: PATH)")
    partition = Unicode(None, allow_none=True, config=True, help="the Slurm partition jobs go to (and whose nodes are used)")
    account = Unicode(None, allow_none=True, config=True, help="sbatch --account")
    qos = Unicode(None, allow_none=True, config=True, help="sbatch --qos")
    time_limit = Int(None, allow_none=True, config=True, help="sbatch --time, in minutes (default: the partition's)")
    gres_mode = Enum(["auto", "per-index", "count"], "auto", config=True,
                     help="how GPUs are asked for: per-index (gres gpu:<type>:<n> with the chosen indices), count, "
                          "or auto (per node, from its GRES types)")
    extra_args = List(Unicode(), config=True, help="more sbatch arguments, e.g. ['--constraint=ib']")
    rest_url = Unicode(None, allow_none=True, config=True,
                       help="submit through slurmrestd at this URL (e.g. unix:///run/slurmrestd/rest.sock) instead of sbatch")
    rest_user = Unicode(None, allow_none=True, config=True, help="slurmrestd service user (default: the server's)")
    jwt_key_file = Unicode(None, allow_none=True, config=True,
                           help="Slurm's JWT key, to mint users' tokens (default: tokens from `scontrol token`)")
    jwt_lifespan_s = Int(3600, config=True, help="lifetime of minted JWTs")
    submit_as_user = Bool(False, config=True, help="submit each job as its owner's Unix account (the server runs as root)")
    instance = Unicode("default", config=True,
                       help="this server's name in Slurm job comments (default: derived from jobs_root)")
    export_env = List(Unicode(), ["PATH", "LANG", "LC_ALL", "TZ"], config=True,
                      help="variables of the server's environment that tasks get")
    slurm_poll_s = Float(1.0, config=True, help="seconds between squeue polls for job states")
    node_poll_s = Float(5.0, config=True, help="seconds between node state polls")
    start_timeout_s = Float(120.0, config=True, help="a job Slurm has not started after this long is failed")
    sync_node_health = Bool(True, config=True, help="drain in hive-lab the nodes Slurm drains or marks down")
    default_gpu_model = Unicode("gpu", config=True, help="GPU type of nodes whose GRES names none")

    def __init__(self, *, state_dir: str | None = None, jobs_root: str | None = None, parent: Any = None,
                 config: Any = None, **traits: Any):
        traits = {k: v for k, v in traits.items() if k in self.class_trait_names() and v is not None}
        super().__init__(parent=parent, config=config, **traits)
        self.cli = SlurmCLI(self.slurm_conf, self.bin_dir)
        self.isolation = Isolation(parent=parent) if parent is not None else Isolation.server_identity()
        if self.instance == "default" and jobs_root:
            # one hive-lab server's jobs, when several servers (or test sessions) share a Slurm cluster
            self.instance = hashlib.sha1(str(jobs_root).encode()).hexdigest()[:12]
        self.rest = None
        if self.rest_url:
            from hive_lab_server.execution.slurm.rest import SlurmREST

            self.rest = SlurmREST(self.rest_url, cli=self.cli, jwt_key_file=self.jwt_key_file,
                                  lifespan_s=int(self.jwt_lifespan_s), service_user=self.rest_user or _os_user())
        self._jobs: dict[str, _Job] = {}
        self._pending: list[TaskExit] = []
        records_dir = (pathlib.Path(state_dir) / "launches" if state_dir else
                       pathlib.Path(jobs_root) / ".slurm-launches" if jobs_root else None)
        self._records = LaunchRecords(records_dir) if records_dir is not None else None
        self._orphans_checked = self._records is None
        self._last_slurm = 0.0
        self._last_nodes = 0.0
        self._slurm_drained: set[str] = set()
        self._nodes: dict[str, SlurmNode] = {}
        try:
            self._refresh_nodes_sync()
        except SlurmError as exc:
            log.warning("hive-lab: Slurm does not answer yet (%s); node details are read at the first launch", exc)

    # --- nodes ----------------------------------------------------------------------------------

    def _refresh_nodes_sync(self) -> None:
        inv = inventory_from(self.cli.nodes_sync(), "", self.partition, self.default_gpu_model)
        self._nodes = inv.nodes

    async def _refresh_nodes(self) -> None:
        raw = await (self.rest.nodes() if self.rest else self.cli.nodes())
        nodes: dict[str, SlurmNode] = {}
        for r in raw:
            if self.partition and self.partition not in (r.get("partitions") or [self.partition]):
                continue
            n = parse_node(r, self.default_gpu_model)
            nodes.setdefault(n.name, n)
        self._nodes = nodes
        self._last_nodes = time.monotonic()
        if self.sync_node_health:
            self._sync_health()

    def _service(self) -> Any:
        return getattr(self.parent, "service", None)

    def _sync_health(self) -> None:
        """Slurm DRAIN/DOWN -> drained in hive-lab (no new work there); RESUME -> undrained again."""
        service = self._service()
        drains = getattr(service, "hardware_events", None)  # (none: the service is not built yet)
        if drains is None:
            return
        known = set(service.config.nodes)
        if not self._slurm_drained:  # after a restart: drains this launcher made before
            try:
                self._slurm_drained = {d["node"] for d in service.store.drains()
                                       if d.get("gpu") is None and d.get("by") == "slurm"}
            except Exception:
                pass
        for name, node in sorted(self._nodes.items()):
            if name not in known:
                continue
            if node.bad and name not in drains.drained_nodes:
                log.warning("hive-lab: Slurm node %s is %s; no new work goes there", name,
                            "+".join([node.state.upper(), *node.flags]))
                drains.set_drain(name, None, True, by="slurm")
                self._slurm_drained.add(name)
            elif not node.bad and name in self._slurm_drained:
                if name in drains.drained_nodes:
                    log.info("hive-lab: Slurm node %s is back (%s)", name, node.state)
                    drains.set_drain(name, None, False, by="slurm")
                self._slurm_drained.discard(name)

    def host_address(self, node: str) -> str:
        """``MASTER_ADDR`` for a gang whose rank 0 runs on ``node``: Slurm's NodeAddr."""
        n = self._nodes.get(node)
        return n.address if n is not None else node

    def task_owner(self, user: str) -> tuple[int, int] | None:
        """Over slurmrestd, or with ``submit_as_user`` as root, jobs run as their owner's Unix account."""
        if not user or not self._as_owner():
            return None
        if self.isolation.isolates() or os.geteuid() == 0:  # root never runs a user's job as root
            try:
                account = self.isolation.account_for(user) if self.isolation.isolates() else \
                    resolve_account(user, allow_root=self.isolation.allow_root)
            except AccountError as exc:
                raise LaunchError(str(exc)) from None
            return None if account is None or account.uid == os.geteuid() else (account.uid, account.gid)
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            raise LaunchError(f"user {user!r} has no Unix account on the hive-lab server, so Slurm cannot run "
                              f"the job as that user (c.SlurmLauncher.submit_as_user / rest_url)") from None
        return None if pw.pw_uid == os.geteuid() else (pw.pw_uid, pw.pw_gid)

    def _as_owner(self) -> bool:
        """Whether jobs run as their owners: over slurmrestd; as root with ``submit_as_user`` or whenever
        the server isolates jobs (c.Isolation, root): ``sbatch --uid=<owner>``, never as root."""
        return self.rest is not None or (os.geteuid() == 0 and (self.submit_as_user or self.isolation.isolates()))

    # --- Launcher interface ---------------------------------------------------------------------

    async def start(self, request: LaunchRequest) -> None:
        images = sorted({t.image for t in request.tasks if t.image})
        if images:
            raise LaunchError(f"the slurm launcher runs tasks as processes on the nodes and cannot run container "
                              f"images ({', '.join(images)}); submit the job without an image")
        if request.job_id in self._jobs:
            raise LaunchError(f"job {request.job_id} is already running in Slurm (job {self._jobs[request.job_id].slurm_id})")
        if not self._nodes or any(t.node not in self._nodes for t in request.tasks):
            try:
                await self._refresh_nodes()
            except SlurmError as exc:
                raise LaunchError(f"Slurm does not answer: {exc}") from None
        owner = self.task_owner(request.user)
        for t in request.tasks:
            pathlib.Path(t.log_path).parent.mkdir(parents=True, exist_ok=True)
            ef = pathlib.Path(exit_file(t))
            ef.parent.mkdir(parents=True, exist_ok=True)
            ef.unlink(missing_ok=True)
            if owner is not None:  # the job, running as its owner, writes its log and exit files there
                private_dir(ef.parent, owner, stop_at=pathlib.Path(t.log_path).parent.parent)
        base_env = {k: os.environ[k] for k in self.export_env if k in os.environ}
        plan = plan_job(request, self._nodes, instance=self.instance, gres_mode=self.gres_mode,
                        partition=self.partition, account=self.account, qos=self.qos, time_limit=self.time_limit,
                        extra_args=self.extra_args, base_env=base_env)
        if self._records is not None:  # before Slurm may run it: a restart knows of it whatever happens next
            self._records.write(request.job_id, {t.task: t.log_path for t in request.tasks})
        try:
            if self.rest is not None:
                slurm_id = await self.rest.submit(plan, user=request.user or None, all_nodes=sorted(self._nodes))
            else:
                args: tuple[str, ...] = ()
                if owner is not None and os.geteuid() == 0:
                    args = (f"--uid={owner[0]}", f"--gid={owner[1]}")
                slurm_id = await self.cli.submit(plan.sbatch_script(), args)
        except SlurmError as exc:
            if self._records is not None:
                self._records.forget(request.job_id)
            raise LaunchError(f"Slurm refused job {request.job_id}: {exc}") from None
        self._jobs[request.job_id] = _Job(request.job_id, slurm_id, {t.task: t for t in request.tasks},
                                          {t.task: t.log_path for t in request.tasks})
        log.info("hive-lab: %s is Slurm job %s", request.job_id, slurm_id)

    async def checkpoint(self, job_id: str, grace_s: float) -> None:
        """``scancel --signal=USR1 --full`` (the batch shell and every step; the task functions catch it,
        the job's processes get it), then wait until the Slurm job ended or ``grace_s`` passed."""
        job = self._jobs.get(job_id)
        if job is None or job.slurm_id is None:
            return
        if self._job_state(job, await self._states()) != "RUNNING":
            return
        try:
            await self._cancel(job, CHECKPOINT_SIGNAL.removeprefix("SIG"))
        except SlurmError as exc:
            log.debug("hive-lab: checkpoint signal to Slurm job %s: %s", job.slurm_id, exc)
            return
        deadline = time.monotonic() + max(0.0, grace_s)
        while time.monotonic() < deadline:
            await asyncio.sleep(min(0.25, max(grace_s, 0.01)))
            if self._job_state(job, await self._states()) in TERMINAL | {"MISSING"}:
                return

    async def stop(self, job_id: str, grace_s: float) -> None:
        job = self._jobs.get(job_id)
        if job is None or job.slurm_id is None:
            return
        job.stopping = True
        states = await self._states()
        state = self._job_state(job, states)
        try:
            if state in ("PENDING", "") or grace_s <= 0:
                if state not in TERMINAL and state != "MISSING":
                    await self._cancel(job)
            elif state not in TERMINAL and state != "MISSING":
                await self._cancel(job, "TERM")  # batch shell and every step
                deadline = time.monotonic() + grace_s
                while time.monotonic() < deadline:
                    await asyncio.sleep(min(0.25, grace_s))
                    if self._job_state(job, await self._states()) in TERMINAL | {"MISSING"}:
                        break
                else:
                    await self._cancel(job)
        except SlurmError as exc:
            if "already completing or completed" not in str(exc) and "Invalid job id" not in str(exc):
                raise
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._job_state(job, await self._states()) in TERMINAL | {"MISSING"}:
                return
            await asyncio.sleep(0.2)
        log.warning("hive-lab: Slurm job %s (%s) did not end within 60 s of scancel", job.slurm_id, job_id)

    async def _cancel(self, job: _Job, signal: str | None = None) -> None:
        if self.rest is not None:
            await self.rest.cancel(job.slurm_id, signal=signal)
        else:
            await self.cli.cancel(job.slurm_id, signal=signal)

    def ack(self, exits: list[TaskExit]) -> None:
        if self._records is None:
            return
        by_job: dict[str, set[str]] = {}
        for e in exits:
            by_job.setdefault(e.job_id, set()).add(e.task)
        for job_id, tasks in sorted(by_job.items()):
            self._records.forget(job_id, tasks)

    async def _unadopted_exits(self) -> list[TaskExit]:
        """Launches an earlier server process recorded that Slurm no longer runs: each task's exit file,
        else lost. (Their Slurm jobs ended while nobody watched, or ``sbatch`` never got to accept them.)"""
        records = self._records.all() if self._records is not None else {}
        if not records:
            return []
        live = await self.running()
        out = []
        for job_id, tasks in sorted(records.items()):
            if job_id in self._jobs or job_id in live:
                continue  # running: adopt() takes it back
            job = _Job(job_id, None, dict.fromkeys(tasks), dict(tasks))
            for task in sorted(tasks):
                out.append(self._exit_from_file(job, task) or TaskExit(
                    job_id, task, None, "lost (the server was down when its Slurm job ended; no exit recorded)"))
        return out

    async def poll(self) -> list[TaskExit]:
        out, self._pending = self._pending, []
        if not self._orphans_checked:
            try:
                out += await self._unadopted_exits()
                self._orphans_checked = True
            except SlurmError as exc:
                log.warning("hive-lab: reading Slurm jobs failed: %s", exc)
        now = time.monotonic()
        if self.sync_node_health and now - self._last_nodes >= self.node_poll_s:
            try:
                await self._refresh_nodes()
            except SlurmError as exc:
                log.warning("hive-lab: reading Slurm nodes failed: %s", exc)
                self._last_nodes = now
        for job in list(self._jobs.values()):  # tasks that wrote their exit file
            for task in list(job.tasks):
                if task in job.done:
                    continue
                e = self._exit_from_file(job, task)
                if e is None:
                    continue
                if e.exit_code is not None and e.exit_code >= 128 and not job.stopping:
                    # killed by a signal: was it Slurm (preemption, node failure, time limit)? Slurm's
                    # verdict comes with the job state; wait a few Slurm polls for it.
                    first = job.signalled.setdefault(task, now)
                    if now - first < 3 * self.slurm_poll_s + 2:
                        continue
                job.done.add(task)
                out.append(e)
        if self._jobs and now - self._last_slurm >= self.slurm_poll_s:
            self._last_slurm = now
            # only the jobs submitted before Slurm is asked: one sbatch'ed while squeue runs is not in
            # its answer, and would be taken for a job Slurm forgot
            known = list(self._jobs.values())
            try:
                states = await self._states()
            except SlurmError as exc:
                log.warning("hive-lab: reading Slurm jobs failed: %s", exc)
                states = None
            if states is not None:
                for job in known:
                    if self._jobs.get(job.job_id) is job:
                        out.extend(await self._check(job, states))
        for job_id in [j for j, job in self._jobs.items() if set(job.tasks) <= job.done]:
            del self._jobs[job_id]
        return out

    async def running(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        # tracked tasks whose exit is not reported yet count as running: the next poll() reports them
        # (a job that ends while the service recovers is not mistaken for a lost one)
        for job_id, job in self._jobs.items():
            for task in job.tasks:
                if task not in job.done:
                    found.setdefault(job_id, set()).add(task)
        for raw in await self._raw_jobs():
            parsed = parse_comment(raw.get("comment") or "")
            if parsed is None or parsed[1] != self.instance or _state(raw) in TERMINAL:
                continue
            job_id, _, tasks = parsed
            if not (raw.get("name") or "").startswith(NAME_PREFIX):
                continue
            tracked = self._jobs.get(job_id)
            for task in tasks:
                if tracked is not None and task in tracked.done:
                    continue
                found.setdefault(job_id, set()).add(task)
        return found

    async def adopt(self, request: LaunchRequest) -> None:
        if request.job_id in self._jobs:
            return
        slurm_id = None
        for raw in await self._raw_jobs():
            parsed = parse_comment(raw.get("comment") or "")
            if parsed and parsed[0] == request.job_id and parsed[1] == self.instance and \
                    (raw.get("het_job_offset") or 0) == 0 and _state(raw) not in TERMINAL:
                slurm_id = int(raw["job_id"])
                break
        job = _Job(request.job_id, slurm_id, {t.task: t for t in request.tasks},
                   {t.task: t.log_path for t in request.tasks})
        self._jobs[request.job_id] = job
        if slurm_id is None:  # ended while we were away: exit files, else lost
            for t in request.tasks:
                job.done.add(t.task)
                self._pending.append(self._exit_from_file(job, t.task) or
                                     TaskExit(request.job_id, t.task, None, "lost (Slurm job gone)"))
            del self._jobs[request.job_id]

    async def close(self) -> None:
        if self.rest is not None:
            await self.rest.close()

    # --- Slurm state ----------------------------------------------------------------------------

    async def _raw_jobs(self) -> list[dict[str, Any]]:
        return await (self.rest.jobs() if self.rest else self.cli.jobs())

    async def _states(self) -> dict[int, list[dict[str, Any]]]:
        """Slurm job id (het leader) -> its component records."""
        out: dict[int, list[dict[str, Any]]] = {}
        for raw in await self._raw_jobs():
            if not (raw.get("name") or "").startswith(NAME_PREFIX):
                continue
            leader = raw.get("het_job_id") or raw.get("job_id")
            out.setdefault(int(leader), []).append(raw)
        return out

    def _job_state(self, job: _Job, states: dict[int, list[dict[str, Any]]]) -> str:
        comps = states.get(job.slurm_id or -1)
        if not comps:
            return "MISSING"
        st = [_state(c) for c in comps]
        if all(s in TERMINAL for s in st):
            for s in ("PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "BOOT_FAIL", "FAILED", "CANCELLED"):
                if s in st:
                    return s
            return st[0]
        if any(s == "RUNNING" for s in st):
            return "RUNNING"
        return next(s for s in st if s not in TERMINAL)

    def _exit_from_file(self, job: _Job, task: str) -> TaskExit | None:
        path = job.log_paths.get(task)
        if not path:
            return None
        try:
            text = pathlib.Path(exit_file(task, path)).read_text().strip()
        except OSError:
            return None
        if text.startswith("mismatch "):
            return TaskExit(job.job_id, task, None, text[len("mismatch "):] + " (not run; requeued when retries remain)")
        try:
            return TaskExit(job.job_id, task, int(text), "")
        except ValueError:
            return None

    async def _check(self, job: _Job, states: dict[int, list[dict[str, Any]]]) -> list[TaskExit]:
        state = self._job_state(job, states)
        comps = states.get(job.slurm_id or -1) or []
        if state == "RUNNING":
            job.seen_running = True
            return []
        if state not in TERMINAL and state != "MISSING":  # pending (or configuring/completing)
            if state != "PENDING":
                return []
            reason = next((c.get("state_reason") or "" for c in comps if c.get("state_reason")), "")
            waited = time.monotonic() - job.submitted
            why = None
            if job.seen_running or any((c.get("restart_cnt") or 0) > 0 for c in comps):
                why = f"Slurm requeued job {job.slurm_id} ({reason or 'no reason given'})"
            elif reason in HOPELESS:
                why = f"Slurm cannot start job {job.slurm_id} where hive-lab placed it: {reason}"
            elif waited > self.start_timeout_s:
                why = (f"Slurm did not start job {job.slurm_id} within {self.start_timeout_s:.0f} s where hive-lab "
                       f"placed it ({reason or 'no reason given'}); another user's Slurm jobs may hold those GPUs")
            if why is None:
                return []
            log.warning("hive-lab: %s: %s; cancelling it", job.job_id, why)
            try:
                await self._cancel(job)
            except SlurmError as exc:
                log.warning("hive-lab: scancel %s: %s", job.slurm_id, exc)
            return self._finish(job, None, why)
        # ended (or forgotten by slurmctld)
        code = None
        reasons = {
            "PREEMPTED": "preempted by Slurm", "NODE_FAIL": "Slurm node failure", "BOOT_FAIL": "Slurm node boot failure",
            "TIMEOUT": "Slurm time limit", "DEADLINE": "Slurm deadline", "OUT_OF_MEMORY": "OOMKilled",
            "MISSING": "lost (Slurm no longer knows the job)",
        }
        reason = reasons.get(state, "")
        if state == "CANCELLED":
            reason = "stopped" if job.stopping else "cancelled in Slurm (scancel)"
            code = _exit_code(comps[0]) if comps else None
            if not job.stopping:
                code = None
        elif state in ("COMPLETED", "FAILED", "OUT_OF_MEMORY"):
            code = _exit_code(comps[0]) if comps else None
            if state == "OUT_OF_MEMORY":
                code = 137
            elif state == "FAILED" and not reason:
                reason = f"Slurm job {job.slurm_id} failed ({comps[0].get('state_reason') or 'no reason'})" if comps else ""
        return self._finish(job, code, reason, slurm_killed=state in SLURM_KILLED)

    def _finish(self, job: _Job, code: int | None, reason: str, slurm_killed: bool = False) -> list[TaskExit]:
        out = []
        for task in job.tasks:
            if task in job.done:
                continue
            job.done.add(task)
            e = self._exit_from_file(job, task)
            if e is not None and slurm_killed and (e.exit_code is None or e.exit_code >= 128):
                # Slurm ended it (the task only saw the signal): Slurm's reason, and lost unless a time limit
                e = TaskExit(job.job_id, task, e.exit_code if reason.startswith("Slurm time") else None, reason)
            if e is None:
                # the task never wrote its exit file: Slurm ended it (or it never started)
                e = TaskExit(job.job_id, task, code if job.stopping or reason == "OOMKilled" else None,
                             reason or "lost (no exit recorded)")
                if e.exit_code == MISMATCH_EXIT:
                    e = TaskExit(job.job_id, task, None, "Slurm placed the task differently")
            out.append(e)
        return out


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "root"
