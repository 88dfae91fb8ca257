"""``HiveLabApp``: the hive-lab Jupyter server extension (enabled automatically on install).

Configure it like any Jupyter app, in ``jupyter_server_config.py`` or on the command line::

    c.HiveLabApp.cluster_config = "/etc/hive-lab/cluster.yaml"   # a path, a dict, or "default"/"philly"/...
    c.HiveLabApp.db_url = "postgresql+psycopg://hive@db/hive"     # default: SQLite in the Jupyter data dir
    c.HiveLabApp.launcher = "docker"                              # local | docker | slurm | pkg.module:Class
    c.HiveLabApp.vc_access = {"@students": ["cv-101"], "ann": ["research", "cv-101"]}
    c.HiveLabApp.admin_users = ["root"]
    c.HiveLabApp.user_limits = {"cv-101": {"default": {"max_gpus": 2}, "groups": {"ta": {"max_gpus": 4}}}}
    c.HiveLabApp.queue_policy = "fair_share"                      # fifo | priority | drf | fair_share
    c.HiveLabApp.fair_share_half_life_s = 86400                   # past usage weighs half after a day
    c.HiveLabApp.nvml_backend = "auto"                            # or "none", "fake:/path/hardware.yaml"
    c.DockerLauncher.allowed_mount_roots = ["/datasets"]          # each launcher is a Configurable too

Every option: ``python -m hive_lab_server --help-all`` (``jupyter server --help-all`` prints its help
before it loads extensions, so it lists none of theirs).

    jupyter lab --HiveLabApp.cluster_config=cluster.yaml --HiveLabApp.launcher=local
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys

from hive_scheduler import ConfigError
from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Any as AnyTrait
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, TraitError, Unicode, default

from hive_lab_server.version import __version__
from hive_lab_server.auth.access import AccessPolicy, server_owner
from hive_lab_server.cluster import resolve_cluster
from hive_lab_server.wire.events import EventBus
from hive_lab_server.api import reads_first
from hive_lab_server.api.load_shedding import InFlight, LoopLag, ShedLog, WriteBudget
from hive_lab_server.api.handlers import ROUTES
from hive_lab_server.execution.launchers import make_launcher
from hive_lab_server.execution.launchers.docker import DockerLauncher
from hive_lab_server.execution.launchers.local import ON_LOOP_MAX_LAG_S, LocalLauncher
from hive_lab_server.execution.launchers.slurm import SlurmLauncher
from hive_lab_server.usage.metrics import Metrics
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.store import Store

#: the service's parts its handlers call, put in the settings as ``hive_lab_<name>`` (``HiveHandler.<name>``)
SERVICE_PARTS = ("admission", "moves", "limits", "hardware_events")


def _refuse_a_jobs_root_owners_cannot_reach(app: HiveLabApp, jobs_root: pathlib.Path) -> None:
    """A server that runs jobs as their owners stops at start when they could not enter their working
    dirs (each job would fail at run time instead). As root, the jobs root itself is made 0711 at
    lock-down, so only the dirs above it count then. Docker mounts each job's dir into its container
    (no host dir above it is entered as the owner), so the docker launcher is not held to it."""
    from hive_lab_server.execution.isolation import Isolation
    from hive_lab_server.execution.isolation.jobs_root import unreachable_jobs_root

    if app.launcher == "docker" or not Isolation(parent=app).isolates():
        return
    problem = unreachable_jobs_root(jobs_root, include_self=os.geteuid() != 0)
    if problem:
        app.log.critical("hive-lab: %s; the server stops", problem)
        raise SystemExit(f"hive-lab: {problem}")


class HiveLabApp(ExtensionApp):
    name = "hive_lab"
    description = "hive-lab: a multi-tenant GPU scheduler inside the Jupyter server"
    version = __version__
    load_other_extensions = True
    # their options are listed by `python -m hive_lab_server --help-all`
    classes = [*ExtensionApp.classes, LocalLauncher, DockerLauncher, SlurmLauncher]

    cluster_config = AnyTrait(
        None,
        allow_none=True,
        config=True,
        help="""The cluster model: a path to a YAML/JSON file (HiveD form or hive-lab's short form),
        a dict, or a built-in model name ("default", "philly", "big20k"). Default: the local NVIDIA GPUs
        (NVML) when there are any, else "default" (one node, 4 simulated GPUs).""",
    )
    db_url = Unicode("", config=True, help="SQLAlchemy URL of the store (default: SQLite in the Jupyter data dir)")
    launcher = Unicode(
        "auto", config=True,
        help="auto (docker when a Docker engine answers, else local) | local | docker | slurm | 'pkg.module:Class'",
    )
    queue_policy = Unicode(
        "fifo", config=True,
        help="""order of jobs inside a VC: fifo | priority | drf | fair_share (the waiting job whose group,
        then whose user, used the fewest GPU-seconds lately, decayed with fair_share_half_life_s, goes first;
        the usage survives restarts: it is derived from the stored accounting records), or one of Gavel's
        policies (max_min_fairness_perf, finish_time_fairness_perf, min_total_duration_perf,
        max_sum_throughput_perf, fifo_perf, gandiva, ...) realised in rounds that pause, resume and migrate
        jobs (docs/checkpoint.md)""",
    )
    fair_share_half_life_s = Float(
        86400.0, config=True,
        help="fair_share: the half-life of past usage in seconds (default one day: yesterday's GPU-hours weigh half)",
    )
    round_length_s = Float(360.0, config=True, help="length of a round of a Gavel queue_policy (seconds)")
    round_rate_tolerance = Float(
        0.1, config=True,
        help="""A Gavel queue_policy is solved again when jobs arrive, end or are resized, when a VC's usable
        GPUs change, or when a job's throughput on a GPU type moved by more than this fraction since the
        last solve; otherwise each round reuses the last allocation (docs/checkpoint.md).""",
    )
    vc_access = Dict(
        config=True,
        help="""Who may submit to which VCs: {"ann": ["research"], "@students": ["cv-101"], "*": ["default"]}.
        Keys are user names, "@group" or "*" (everyone); values are VC names or "*" (every VC).
        Admins may use every VC.""",
    )
    user_limits = Dict(
        config=True,
        help="""Per-user limits inside each VC: {"cv-101": {"default": {"max_gpus": 2, "max_kernels": 1},
        "groups": {"ta": {"max_gpus": 4}}, "users": {"ann": {"max_priority": 100}}}}. Keys: max_gpus,
        max_running_jobs, max_kernels, max_queued_jobs, max_priority, max_time_limit_s (integers >= 0).
        Most specific wins key by key (user > group > default; a user in several groups gets the most
        generous group value). Limits an admin stores with PUT vcs/{vc}/limits replace a VC's entry here.""",
    )
    admin_users = List(Unicode(), config=True, help="users who may do everything")
    admin_groups = List(Unicode(), config=True, help="groups whose members may do everything")
    owner_is_admin = Bool(True, config=True, help="the user running the server is an admin")
    owner = Unicode(config=True, help="the user running the server (default: JUPYTERHUB_USER or the OS user)")
    preemption_grace_s = Float(10.0, config=True, help="seconds between SIGTERM and SIGKILL for preempted jobs")
    stop_grace_s = Float(10.0, config=True, help="seconds between SIGTERM and SIGKILL for cancelled jobs")
    throughputs_file = Unicode("gavel", config=True, help="Gavel-format throughput file (job type x GPU type x "
                               "GPU count -> steps/s) for jobs that declare a job_type; 'gavel' = the copy shipped "
                               "with hive-lab, '' = none")
    checkpoint_grace_s = Float(30.0, config=True, help="seconds a job has, after the checkpoint signal (SIGUSR1), to "
                               "save its checkpoint and exit before it is paused, preempted, migrated or resized "
                               "(then SIGTERM and the stop grace as usual; 0 = no checkpoint signal); see "
                               "docs/checkpoint.md")
    cancel_wait_s = Float(5.0, config=True, help="how long DELETE jobs/{id} waits for the job to stop before answering")
    poll_interval_s = Float(0.1, config=True, help="how often the service asks the launcher for exited tasks")
    backfill = Bool(
        False, config=True,
        help="""Reservations with backfill inside each VC: the first job that does not fit holds a reservation
        at its estimated start, and a job behind it starts only if its time limit ends before then (it never
        delays the reservation). Off (default): a job that does not fit is passed by any job that fits
        (HiveD's way, no head-of-line blocking; an overtaken job holds its VC back after an hour). Turn it
        on when jobs carry time limits (e.g. per-VC default limits): without limits nothing may pass.""",
    )
    overflow = Bool(
        True, config=True,
        help="""Opportunistic overflow (issue 12): a guaranteed job its VC cannot place now may run in idle
        GPUs (other VCs' idle cells first) as an opportunistic, preemptible job; when a VC needs those GPUs
        back it is preempted and queued again in its own VC without using a retry, and its own VC's GPUs
        still take it when they free up. With it, a VC's own jobs are placed where its private cluster would
        place them (overflowed work in its cells is preempted rather than steering the choice), as in the
        simulator, so overflow does not fragment a VC's cells into longer waits (issue 25). On by default;
        False: a guaranteed job waits for its VC's cells (HiveD's way).""",
    )
    clock = AnyTrait(
        None, allow_none=True, config=True,
        help="""The service's clock: a callable returning UNIX seconds (default time.time). Tests inject one
        to run a simulated week through a real server (the history export, issue 28).""",
    )
    recovery_wait_s = Float(
        30.0, config=True,
        help="""After a restart hive-lab first recovers its jobs (store + what the launcher runs); a request
        arriving meanwhile waits up to this many seconds, then gets 503 (retry later).""",
    )
    vc_time_limits = Dict(
        config=True,
        help="""Run time limits per VC, in seconds: {"cv-101": {"default_s": 3600, "max_s": 14400}}; "*" applies
        to VCs not named. default_s is the limit of batch jobs that give none (kernels get a limit only
        when their kernelspec asks for one, or their VC's kernel_limits cap); a job asking for more than max_s is refused (400). At its
        limit a job gets the stop signal and stop_grace_s, then ends failed ("time limit 1h reached").""",
    )
    kernel_limits = Dict(
        config=True,
        help="""Caps on every GPU kernel of a VC, whatever its kernelspec says (a user may write her own):
        {"cv-101": {"max_idle_s": 1800, "max_time_limit_s": 14400}}; "*" applies to VCs not named.
        max_idle_s: the service itself cancels a GPU kernel that executed nothing (and whose GPUs were
        not busy) for that long, even when its kernelspec says idle_timeout 0. max_time_limit_s: the time
        limit of a GPU kernel that asks for none or for more. `hive-lab course init` writes both.""",
    )
    jobs_root = Unicode(
        "", config=True,
        help="""where jobs' working dirs and logs go (default: <data dir>/hive_lab/jobs). When jobs run as
        their owners (Isolation) with the local or Slurm launcher, every dir above it must be searchable by
        others (o+x), e.g. /var/lib/hive-lab/jobs (0711): the server does not start otherwise.""",
    )
    max_body_bytes = Int(2 * 1024 * 1024, config=True, help="largest accepted request body (413 above)")
    max_requests_in_flight = Int(
        200, config=True,
        help="""Most hive-lab API reads (GET, DELETE) served at once, and apart from them, most writes (POST,
        PUT, PATCH) served or waiting their turn (see max_loop_lag_ms); more are answered 503 with Retry-After: 1
        at once (load shedding) instead of queueing without bound; a write is refused from its headers
        alone, before its body is read or its caller authenticated. GET me and GET metrics are never shed.
        0: no bound.""",
    )
    max_loop_lag_ms = Float(
        50.0, config=True,
        help="""The event loop's lag hive-lab keeps reads within under a flood of writes: while the loop runs
        later than this, the writes (POST, PUT, PATCH) served at once are halved (every 0.1 s, down to 64), and
        grow again by one every 0.1 s while it does not (AIMD); writes beyond that number are answered 503
        with Retry-After: 1 at once, so reads (the panel, GET jobs, GET cluster) are still answered in about
        this time. Reads have their own max_requests_in_flight. 0: writes are bounded by
        max_requests_in_flight only.""",
    )
    writes_per_loop_turn = Int(
        8, config=True,
        help="""While hive-lab API reads are about (one came in the last second), most hive-lab writes (POST,
        PUT, PATCH) let into one turn of the event loop; more wait, parsed but untouched, for the next turns,
        first come first served, while reads and everything else go on at once. A flood of writes then
        cannot make the loop's turns long, so reads are answered within a few short turns (issue 40).
        Without reads about, writes are not held. 0: no such limit.""",
    )
    reads_first = Bool(
        True, config=True,
        help="""A hive-lab API read's steps run at the head of the event loop's queue of ready callbacks: once a
        connection's latest request was a hive-lab read (GET), its next request's bytes, parsing and handler go
        ahead of the callbacks queued before them, so under a flood of writes a read is answered in the turn its
        bytes arrive instead of three turns later (issue 40; api/reads_first.py). Nothing else is reordered, and
        every callback still runs in the turn it would have or the next one. Needs asyncio's own event loop.""",
    )
    max_unfinished_jobs = Int(
        10000, config=True,
        help="""Most jobs hive-lab holds unfinished at once (waiting, held by depends_on, starting, running,
        stopping: each is kept in memory until it ends). A submit beyond it is answered 503 with
        Retry-After (counted in hive_lab_submits_shed_total; array elements and scheduled runs wait or are
        refused likewise) instead of taking jobs faster than they run, with a backlog and a memory that grow
        without bound. Slurm's MaxJobCount has the same default. 0: no bound.""",
    )
    events_replay_max = Int(
        10000, config=True,
        help="""GET events?since=N replays the stored state changes after N when there are at most this many;
        with more (or an N the store does not know) it sends {"type": "snapshot"} instead: refetch, then
        go on from its seq (docs/rest-api.md).""",
    )
    events_buffer_bytes = Int(
        2 * 1024 * 1024, config=True,
        help="""Most bytes the server may hold for one events websocket subscriber: the messages waiting for
        it and the batch its socket is sending (framed, with tornado's per-message objects), counted as
        the memory they take. A subscriber that falls further behind is closed with code 4008 and a
        reason saying so; it may reconnect with since=<the last seq it read>. A replay that would take
        more than half of it is a snapshot marker instead.""",
    )
    gc_freeze = Bool(
        True, config=True,
        help="""Once the service has started (recovery done), move every object alive then (jupyter_server,
        the imports, the recovered state: ~300,000 objects) out of Python's cyclic garbage collector
        (gc.freeze). Its full passes then scan only what came later: ~12 ms instead of ~160 ms of a
        blocked event loop each (the submit p99). Objects frozen are still freed when unreferenced;
        only a reference cycle among them would never be collected. False: the collector as usual.""",
    )
    gc_full_interval_s = Float(
        60.0, config=True,
        help="""Seconds between Python's full garbage collections, which the service runs on this timer
        instead of when Python's allocation counters say so: each walks every object alive and blocks
        the event loop while it does (~100-240 ms with 10,000 unfinished jobs), and under a flood of
        submits Python's own rule started one every ~2 s (the worst reads' latency). Young objects are
        collected as before; only reference cycles among old ones wait for the timer. 0: Python's own rule.""",
    )
    gil_switch_interval_s = Float(
        0.001, config=True,
        help="""Python's thread switch interval while the service runs (sys.setswitchinterval; Python's own is
        0.005): the longest the event loop waits for the interpreter lock when it wants it back from a worker
        thread (the start estimates' replay, task starts, the GPU sweep). Each store query and socket call
        gives the lock up and takes it back, so with a replay running a read's few queries each waited up to
        5 ms: under a 2x submit flood GET jobs' p99 ~40 ms of its own, ~29 ms at 0.001 (issue 40). 0: leave
        Python's.""",
    )
    nvml_backend = Unicode(
        "auto", config=True,
        help="""Where GPU inventory and health come from: "auto" (NVML via pynvml when a driver is
        there), "none", or "fake:/path/to/hardware.yaml" (a described machine with scripted faults;
        see hive_lab_server.hardware.fake_nvml).""",
    )
    gpu_sample_interval_s = Float(5.0, config=True, help="seconds between GPU samples (utilisation, health); 0 = off")
    gpu_share_modes = Dict(
        config=True,
        help="""How shares of a GPU (gpus: 0.5/0.25/0.125) are enforced, per GPU type ("*" = the rest):
        auto (MIG where NVML lists MIG devices, else timeslice), mig, mps (an MPS daemon per shared GPU;
        needs nvidia-cuda-mps-control), timeslice (memory budget enforced by the GPU sampler), none (no
        shares). Default: auto for every type. See hive_lab_server.hardware.sharing.""",
    )
    mode = CaselessStrEnum(
        ["scheduler", "client"], config=True,
        help="""scheduler: this server runs hive-lab's scheduler (personal mode, or the JupyterHub service).
        client: a user's single-user server under JupyterHub; no scheduler starts here and hive_lab/api/
        forwards to the service (service_url) as the server's owner (see hub.client_mode).
        Default: HIVE_LAB_MODE, else client when HIVE_LAB_SERVICE_URL is set, else scheduler.""",
    )
    service_url = Unicode(
        config=True, help="client mode: the hive-lab service's URL (default: HIVE_LAB_SERVICE_URL)",
    )

    @default("mode")
    def _mode_default(self) -> str:
        return os.environ.get("HIVE_LAB_MODE") or ("client" if os.environ.get("HIVE_LAB_SERVICE_URL") else "scheduler")

    @default("service_url")
    def _service_url_default(self) -> str:
        return os.environ.get("HIVE_LAB_SERVICE_URL", "")

    @default("owner")
    def _owner_default(self) -> str:
        return server_owner()

    @property
    def data_root(self) -> pathlib.Path:
        return pathlib.Path(jupyter_data_dir()) / "hive_lab"

    def _throughputs(self):
        """The throughput file for declared job types (None when ``throughputs_file`` is '')."""
        if not self.throughputs_file:
            return None
        from hive_scheduler.hetero import ThroughputError, load_throughputs

        try:
            return load_throughputs(self.throughputs_file)
        except ThroughputError as exc:
            self.log.critical("hive-lab: HiveLabApp.throughputs_file: %s", exc)
            raise SystemExit(f"hive-lab: HiveLabApp.throughputs_file: {exc}") from None

    def initialize_settings(self) -> None:
        if self.mode == "client":
            from hive_lab_server.hub.client_mode import initialize_client

            return initialize_client(self)
        db_url = self.db_url or f"sqlite:///{self.data_root / 'hive_lab.sqlite'}"
        jobs_root = pathlib.Path(self.jobs_root or self.data_root / "jobs")
        jobs_root.mkdir(parents=True, exist_ok=True)
        try:
            self.cluster = resolve_cluster(self.cluster_config, self.nvml_backend)
        except ConfigError as exc:
            # jupyter_server would log a failed extension and serve on without hive-lab (a bare 404 in
            # the panel); a scheduler with a broken cluster model must not look like it runs
            self.log.critical("hive-lab: the cluster config is not valid, so the server stops: %s", exc)
            raise SystemExit(f"hive-lab: the cluster config is not valid: {exc}") from None
        from hive_lab_server.auth.access import unknown_vcs

        for problem in unknown_vcs(self.vc_access, self.cluster.config.virtual_clusters):
            self.log.error("hive-lab: %s", problem)
        from hive_lab_server.jobs.lifecycle.time_limit import TimeLimitError, parse_vc_time_limits

        try:
            parse_vc_time_limits(self.vc_time_limits, sorted(self.cluster.config.virtual_clusters))
        except TimeLimitError as exc:
            self.log.critical("hive-lab: %s; the server stops", exc.message)
            raise SystemExit(f"hive-lab: {exc.message}") from None
        from hive_lab_server.jobs.lifecycle.kernel_caps import KernelCapsError, parse_kernel_limits

        try:
            parse_kernel_limits(self.kernel_limits, sorted(self.cluster.config.virtual_clusters))
        except KernelCapsError as exc:  # a course whose caps do not apply must not look like it runs
            self.log.critical("hive-lab: %s; the server stops", exc.message)
            raise SystemExit(f"hive-lab: {exc.message}") from None
        from hive_scheduler import Scheduler
        from hive_scheduler.fair_share import FairShareSettings

        from hive_lab_server.timeshare.rounds import LIVE_POLICIES

        # a Gavel policy decides in rounds (rounds.RoundDriver); the core then serves its choice in order
        try:
            scheduler = Scheduler(self.cluster.config,
                                  policy="fifo" if self.queue_policy in LIVE_POLICIES else self.queue_policy,
                                  fair_share=FairShareSettings(half_life_s=self.fair_share_half_life_s),
                                  # with overflow, a VC's jobs are placed as on its private cluster (issue 25)
                                  private_placement=self.overflow)
        except (ConfigError, ValueError) as exc:
            self.log.critical("hive-lab: the queue policy is not valid, so the server stops: %s", exc)
            raise SystemExit(f"hive-lab: the queue policy is not valid: {exc}") from None
        from hive_lab_server.jobs.limits import LimitsError, parse_config

        try:
            user_limits = parse_config(self.user_limits, self.cluster.config.virtual_clusters)
        except LimitsError as exc:  # like a broken cluster model: a server that ignores limits must not run
            self.log.critical("hive-lab: HiveLabApp.user_limits is not valid, so the server stops: %s", exc)
            raise SystemExit(f"hive-lab: HiveLabApp.user_limits is not valid: {exc}") from None
        self.store = Store(db_url)
        self.events = EventBus()
        self.in_flight = InFlight(self.max_requests_in_flight)  # reads (and DELETE)
        self.loop_lag = LoopLag()
        self.writes_in_flight = WriteBudget(self.loop_lag, self.max_requests_in_flight, self.max_loop_lag_ms / 1000)
        self.shed_log = ShedLog(self.log.warning)
        self.metrics = Metrics()
        self.metrics_registry = self.metrics.registry
        if self.overflow:
            from hive_scheduler.overflow import OverflowScheduler

            scheduler = OverflowScheduler(scheduler)
        scheduler.backfill = self.backfill  # (read by the passes and by the estimates' twin when it is built)
        self.launcher_requested = self.launcher
        if self.launcher == "auto":
            from hive_lab_server.execution.launchers.docker import engine_reachable

            self.launcher = "docker" if engine_reachable() else "local"
            # an ordinary choice, not a fault: an info line (the cluster API shows it too)
            self.log.info("hive-lab: launcher 'auto' chose %s: jobs run %s (HiveLabApp.launcher picks another)",
                          self.launcher, "in Docker containers (a Docker engine answers)" if self.launcher == "docker"
                          else "as local processes (no Docker engine answers)")
        _refuse_a_jobs_root_owners_cannot_reach(self, jobs_root)
        launcher = make_launcher(
            self.launcher,
            parent=self,
            state_dir=str(jobs_root / f".{self.launcher.split(':')[0].rsplit('.', 1)[-1]}-launcher"),
            jobs_root=str(jobs_root),
            log=self.log,
            inventory=self.cluster.inventory,
        )
        if isinstance(launcher, LocalLauncher):  # a one-task start on the loop only while the loop keeps up
            launcher.loop_busy = lambda: self.loop_lag.lag_s > ON_LOOP_MAX_LAG_S
        from hive_lab_server.hardware.sharing import GpuSharing

        try:
            sharing = GpuSharing(self.gpu_share_modes, mps_root=str(jobs_root / ".mps"))
        except ValueError as exc:
            raise TraitError(f"HiveLabApp.{exc}") from None
        self.service = HiveService(
            scheduler=scheduler,
            config=self.cluster.config,
            store=self.store,
            launcher=launcher,
            jobs_root=jobs_root,
            gpu_uuids=self.cluster.gpu_uuids,
            preemption_grace_s=self.preemption_grace_s,
            stop_grace_s=self.stop_grace_s,
            checkpoint_grace_s=self.checkpoint_grace_s,
            throughputs=self._throughputs(),
            poll_interval_s=self.poll_interval_s,
            events=self.events,
            metrics=self.metrics,
            vc_time_limits=self.vc_time_limits,
            user_limits=user_limits,
            sharing=sharing,
            max_unfinished_jobs=self.max_unfinished_jobs,
            kernel_limits=self.kernel_limits,
            **({"clock": self.clock} if self.clock is not None else {}),
        )
        if self.queue_policy in LIVE_POLICIES:
            from hive_lab_server.timeshare.rounds import RoundDriver

            self.service.rounds = RoundDriver(self.service, self.queue_policy, self.round_length_s,
                                               self.round_rate_tolerance)
        from hive_lab_server.hardware.integration import make_monitor
        from hive_lab_server.jobs.lifecycle import presentation

        self.hardware = make_monitor(self.service, self.cluster, presentation.cluster_object(self.service)["gpus"],
                                     self.nvml_backend, self.gpu_sample_interval_s, self.metrics_registry)
        self.service.hardware = self.hardware
        self.access = AccessPolicy(
            self.vc_access,
            self.admin_users,
            self.admin_groups,
            self.owner if self.owner_is_admin else None,
            sorted(self.cluster.config.virtual_clusters),
        )
        from hive_lab_server.jobs.pipelines.schedules import Schedules
        from hive_lab_server.store.schedules import ScheduleStore

        self.schedules = Schedules(store=ScheduleStore(self.store), service=self.service, access=self.access)
        self.service.schedules = self.schedules  # ticked by the service's loop, on its clock
        self.settings["hive_lab"] = self
        # the parts the handlers call, as jupyter_server hands its handlers ``kernel_manager`` (api/handlers/base.py)
        self.settings.update({f"hive_lab_{name}": getattr(self.service, name) for name in SERVICE_PARTS})
        from hive_lab_server.execution.isolation import Isolation
        from hive_lab_server.execution.isolation.authorizer import install as install_authorizer

        from hive_lab_server.execution.isolation.server_files import protect, server_secret_files

        isolation = Isolation(parent=self)
        if isolation.shared_api_only:
            install_authorizer(self)
        if isolation.isolates():
            protect(server_secret_files(self), self.log)
            if os.geteuid() == 0:
                _refuse_mps_where_locked(isolation, self.gpu_share_modes)
                _lock_down(isolation, jobs_root, self.log, getattr(launcher, "needs_gpu_group", False))
        from hive_lab_server.kernels.websocket import install

        # (self.settings holds the server's settings here and is copied back into them afterwards)
        if not install(self.settings):  # queued GPU kernels: no 500 on their websocket
            self.log.info("hive-lab: kernel websockets use %s (configured), not hive-lab's",
                          self.settings.get("kernel_websocket_connection_class"))
        self.log.info(
            "hive-lab: %d GPUs (%s cluster), VCs %s, launcher %s, store %s",
            self.cluster.config.gpu_count(), self.cluster.origin, ", ".join(self.access.all_vcs),
            launcher.name, db_url.split("@")[-1],
        )

    @property
    def launcher_info(self) -> dict:
        """The launcher in effect and how it was chosen (``GET cluster`` shows it: no silent fallback)."""
        requested = getattr(self, "launcher_requested", self.launcher)
        return {"name": self.launcher, "chosen_by": "auto" if requested == "auto" else "config"}

    @property
    def hardware_info(self) -> dict:
        """Where the GPUs come from (``GET cluster``): ``simulated`` when jobs run on this machine (local
        or Docker launcher) and NVML sees no GPU here, so the cluster's GPUs are only modelled; the
        panel and ``hive-lab top`` say so instead of showing empty GPU charts without a word."""
        local = getattr(self.cluster, "local", None)
        simulated = local is None and self.launcher in ("local", "docker")
        return {"source": self.cluster.origin, "gpus_seen_here": len(local.gpus) if local is not None else 0,
                "simulated": simulated}

    @property
    def openapi_yaml(self) -> bytes:
        """The OpenAPI document ``GET spec.yaml`` serves (built once per process from the route table)."""
        from hive_lab_server.api.openapi import openapi_yaml

        return openapi_yaml()

    def initialize_handlers(self) -> None:
        from hive_lab_server.api.handlers.bokeh_js import ROUTE as BOKEH_JS_ROUTE, BokehJsHandler
        from hive_lab_server.kernels.session_handlers import SESSION_ROUTES

        # BokehJS for the extension's charts, served by every server the extension runs in (not the REST API)
        self.handlers.append((BOKEH_JS_ROUTE, BokehJsHandler))
        # a GPU kernel the service refuses: its 4xx and sentence, not jupyter_server's 500 (either mode)
        self.handlers.extend(SESSION_ROUTES)
        if self.mode == "client":
            from hive_lab_server.hub.client_mode import CLIENT_ROUTES

            return self.handlers.extend(CLIENT_ROUTES)
        self.handlers.extend(ROUTES)

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        # jupyter_server already serves (its own endpoints are not held up); hive-lab's handlers wait
        # for the end of this recovery (``HiveService.wait_ready``)
        if self.mode == "client":
            return
        from hive_lab_server.stop_signals import stop_cleanly_on_sigint

        stop_cleanly_on_sigint(serverapp, self.log)  # JupyterHub stops its services with SIGINT
        from hive_lab_server.api import connection_shedding, read_priority

        # each turn of the loop lets a few writes in (issue 40)
        writers = read_priority.WritesPerTurn(self.writes_per_loop_turn) if self.writes_per_loop_turn > 0 else None
        # writes beyond the write budget are answered 503 before a handler is made (issue 40)
        # and a submit the service is too full to take is refused there too, its body never parsed
        connection_shedding.install(serverapp, self.writes_in_flight, self._shed_at_connection, writers,
                                    full=self.service.admission.refusal_now,
                                    on_refused=self.metrics.submits_shed.inc)
        await self.service.start()
        await self.hardware.start()
        if self.gil_switch_interval_s > 0:
            self._switch_interval_was = sys.getswitchinterval()
            sys.setswitchinterval(self.gil_switch_interval_s)
        if self.reads_first and not reads_first.install(asyncio.get_running_loop()):
            self.log.info("hive-lab: reads_first needs asyncio's own event loop; reads wait in the loop's queue")
        if self.writes_in_flight.adaptive:  # (a timer every 10 ms: only when something reads it)
            self.loop_lag.start()
        if self.gc_freeze:
            import gc

            gc.collect()  # (what is garbage already goes first, once)
            gc.freeze()
        if self.gc_full_interval_s > 0:
            from hive_lab_server.full_collections import TimedFullCollections

            self.full_collections = TimedFullCollections(self.gc_full_interval_s)
            self.full_collections.start()

    def _shed_at_connection(self, what: str) -> None:
        self.writes_in_flight.shed += 1
        self.metrics.requests_shed.inc()
        self.shed_log.shed(what)

    async def stop_extension(self) -> None:
        if self.mode == "client":
            return
        if getattr(self, "loop_lag", None) is not None:
            self.loop_lag.stop()
        if getattr(self, "full_collections", None) is not None:
            self.full_collections.stop()
        if getattr(self, "_switch_interval_was", None) is not None:
            sys.setswitchinterval(self._switch_interval_was)
            self._switch_interval_was = None
        # parts that were never made (initialisation failed half-way) have nothing to stop
        for part in ("hardware", "service"):
            if getattr(self, part, None) is not None:
                await getattr(self, part).stop()


def _refuse_mps_where_locked(isolation, share_modes: dict) -> None:
    """MPS cannot share a GPU whose nodes are locked: the control daemon starts the MPS server as the first
    client's account, outside that client's job (not in its namespace or cgroup). On a real H100 the
    descriptor sweep killed that server as a GPU holder outside any job; and with the nodes root 0600 (a
    driver that keeps the lock) it could not open them at all."""
    mps = sorted(str(t) for t, m in (share_modes or {}).items() if m == "mps")
    if mps and isolation.lock_gpu_devices:
        raise SystemExit(
            f"hive-lab: HiveLabApp.gpu_share_modes shares {', '.join(mps)} through MPS, which cannot work where jobs "
            f"run under their owners' accounts with the GPUs' nodes locked: the MPS server runs as a job's user "
            f"outside the job, where it may not hold the GPU. Use 'timeslice' or 'mig' for those GPU types, or run "
            f"without the lock (c.Isolation.lock_gpu_devices = False)")


def _lock_down(isolation, jobs_root: pathlib.Path, log, needs_gpu_group: bool = False) -> None:
    """What a server that isolates jobs (as root) enforces at every start: the jobs root is not listable
    (each job's dir is reached by its own owner only), and the GPUs' device nodes open only in jobs:
    root:root 0600, or root:<gpu_group> 0660 when the launcher needs the group (Docker), and then the
    jobs root is a nosuid mount and setgid files of the group found in it are disarmed."""
    from hive_lab_server.execution.isolation import gpu_access

    os.chmod(jobs_root, 0o711)
    if not isolation.lock_gpu_devices:
        log.warning("hive-lab: Isolation.lock_gpu_devices is off: users' own processes may open the GPUs")
        return
    group = isolation.gpu_group if needs_gpu_group else None
    report = gpu_access.lock_down(isolation.gpu_globs(), group)
    if report.gid is not None and gpu_access.device_nodes(isolation.gpu_globs()):
        reopened = gpu_access.driver_reopens_nodes(isolation.nvidia_params_file, report.gid,
                                                   0o600 if group is None else 0o660)
        if reopened:
            raise SystemExit(f"hive-lab: {reopened}")
    for problem in report.problems:
        log.error("hive-lab: cannot lock the GPUs' device nodes down: %s", problem)
    if report.locked:
        log.info("hive-lab: GPU device nodes %s are now root:%s %s (GPUs only through jobs)",
                 ", ".join(report.locked), report.group, "0660" if group else "0600")
    if group is None:
        return
    try:
        if gpu_access.ensure_nosuid(jobs_root):
            log.info("hive-lab: the jobs root %s is now a nosuid mount (no file in it carries the group %s out "
                     "of a job)", jobs_root, group)
    except OSError as exc:
        log.error("hive-lab: %s; containers granted GPUs are refused until it is", exc)
    gid = report.gid if report.gid is not None else gpu_access.gpu_group_gid(group)
    found = gpu_access.setgid_files(jobs_root, gid, disarm=True) if gid is not None else []
    if found:
        log.warning("hive-lab: setgid files of the GPU group %s found in the jobs root (their setgid bit is now "
                    "cleared): %s", group, ", ".join(found))
