"""The core's record of one job (shared by the scheduler, placement, recovery and the views).

Kept apart from ``scheduler`` so that the parts that install or describe jobs import it without a
cycle. States and the reason a waiting job did not start are enums/dataclasses, not magic values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from weakref import WeakValueDictionary

from .shares import job_share
from .types import JobRequest, TaskPlacement


class JobState(str, Enum):
    """Where a job is in the core (the ``state`` of a JobView is its value)."""

    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTING = "preempting"   # holds (reserves) its GPUs until its victims are gone


class Mode(IntEnum):
    """What a guaranteed placement attempt may take."""

    FREE = 0           # only GPUs nobody uses
    OPPORTUNISTIC = 1  # also GPUs running opportunistic work (their jobs become victims)
    DISPLACE = 2       # preemption search: also the VC's own jobs of priority <= the search's cutoff


# plain module constants: on Python 3.11 reading an enum member off its class costs ~0.5 us, and the
# scheduling loops compare states often
WAITING, RUNNING, PREEMPTING = JobState.WAITING, JobState.RUNNING, JobState.PREEMPTING
FREE, OPPORTUNISTIC, DISPLACE = Mode.FREE, Mode.OPPORTUNISTIC, Mode.DISPLACE


@dataclass(frozen=True)
class NoFit:
    """It did not fit (the views explain why from the current state)."""


@dataclass(frozen=True)
class HeldBack:
    """An overtaken job of the same VC waited too long: jobs behind it wait until it starts (``reserved``:
    it reserves cells, and not enough GPUs are free outside them)."""

    for_job: str
    reserved: bool = False


@dataclass(frozen=True)
class Requeued:
    """It lost a reservation (taken over, GPUs went bad, reconfiguration): ``reason`` says which."""

    reason: str


@dataclass(frozen=True)
class OverLimit:
    """Starting it would take its owner over a per-user limit of its VC (``limit``); ``reason`` says which."""

    limit: str
    reason: str


@dataclass(frozen=True)
class Reserved:
    """Under ``backfill``: an earlier job of the VC that does not fit yet holds a reservation; this
    one may only start ahead of it if its time limit ends before the reservation's start."""

    for_job: str
    start: float | None   # the reservation's estimated start (None: unknown)
    limit: float | None   # this job's time limit


Failure = NoFit | HeldBack | Requeued | OverLimit | Reserved
NOFIT = NoFit()


class Job:
    """A job known to the core: its request, state, what it holds and who it waits for."""

    __slots__ = ("req", "seq", "state", "opp", "demoted", "placement", "vleaves", "pleaves", "reserved", "res",
                 "waiting_on", "preemptors", "preempted_by", "bypass_since", "fail", "qkey", "started_at",
                 "detached", "gpus", "shape", "share", "lent", "lost_at")

    def __init__(self, req: JobRequest, seq: int):
        self.lost_at = None  # when a higher-priority job last took its reservation over
        self.req = req
        self.seq = seq
        self.state = JobState.WAITING
        self.opp = req.priority == -1
        self.demoted = False
        self.placement: tuple[TaskPlacement, ...] = ()
        self.vleaves: list = []       # virtual GPUs of its VC it holds (guaranteed jobs)
        self.pleaves: list = []       # physical GPUs it runs on (in this cluster config)
        self.reserved: list = []      # physical GPUs it reserves while preempting
        self.res: list = []           # (node, cpus, memory_mb) it takes
        self.waiting_on: list[str] = []     # preempting: victims still running
        self.preemptors: list[str] = []     # running: preemptors waiting for it
        self.preempted_by: str | None = None
        self.bypass_since: float | None = None
        self.fail: Failure | None = None
        self.qkey = None
        self.started_at: float | None = None
        # running tasks on hardware a reconfiguration removed: (placement, GPU type); they run on until
        # the job ends, hold their VC's virtual GPUs (when guaranteed) but no physical cell
        self.detached: tuple = ()
        self.gpus = req.total_gpus  # GPUs it runs on (fair-share usage counts them each call)
        self.shape = shape_of(req)  # what placement depends on (a pass tries each shape once), computed once
        self.share = job_share(req)  # eighths of one GPU it asks for (0: whole GPUs), computed once
        # holds its VC's virtual GPUs but none of the physical ones (``Scheduler.lend``): opportunistic work
        # may run there; it never evicts any and holds no CPUs or memory
        self.lent = False

    def reset_placement(self) -> None:
        """Forget everything it holds (the caller has released it or is building a new state)."""
        self.pleaves, self.vleaves, self.reserved, self.res = [], [], [], []
        self.waiting_on = []
        self.placement = ()
        self.fail = None
        self.detached = ()


class Shape:
    """A job's ``shape_key`` as one shared object: jobs of equal shapes alive at once hold the same one, so
    a scheduling pass's memo (shape -> failure) hashes an object's identity, not a nested tuple (a pass
    looks the shape up for each of its VC's waiting jobs, hundreds on a busy cluster)."""

    __slots__ = ("key", "__weakref__")

    def __init__(self, key: tuple):
        self.key = key

    def __repr__(self) -> str:
        return f"Shape({self.key!r})"


_SHAPES: WeakValueDictionary = WeakValueDictionary()  # key -> its Shape while a job holds it (no growth)


def shape_of(req: JobRequest) -> Shape:
    """The shared ``Shape`` of ``req``."""
    key = shape_key(req)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _SHAPES[key] = Shape(key)
    return shape


def shape_key(req: JobRequest) -> tuple:
    """What placing ``req`` depends on besides the cluster: jobs of one shape fit or not alike."""
    tasks = req.tasks
    if len(tasks) == 1:  # (the common case, without a generator: every submit makes one)
        t = tasks[0]
        return ((t.gpus, t.count, t.gpu_type, t.cpus, t.memory_mb),), req.priority, req.within, req.pinned_cell
    return (tuple((t.gpus, t.count, t.gpu_type, t.cpus, t.memory_mb) for t in tasks),
            req.priority, req.within, req.pinned_cell)
