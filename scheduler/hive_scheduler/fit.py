"""Could a job ever run on this cluster? (``Scheduler.check_can_ever_fit``.)

The placement code itself answers, on an empty twin of the cluster (``Scheduler.fork``) inside a
``trial`` that is undone: its gang (all tasks at once) must fit in the cells its VC guarantees (for an
opportunistic job, in the whole cluster) with every GPU free and healthy. The answer depends only on
the config and the job's shape, so it is remembered per shape. ``core`` is the ``Scheduler`` (not
imported here: ``scheduler.py`` imports this module).
"""

from __future__ import annotations

from .errors import RequestError
from .jobs import FREE, Job, shape_key
from .physical import place_opportunistic
from .shares import job_share, share_proxy
from .types import JobRequest
from .validation import validate_request

MEMO_SIZE = 4096  # shapes remembered (then forgotten all at once)


class FitCheck:
    """One per cluster state (a reconfiguration makes a new one): the empty twin and the answers so far."""

    def __init__(self, core):
        self.core = core
        self.twin = None                    # this cluster with nothing on it (made on first use)
        self.memo: dict[tuple, bool] = {}   # (shape, VC) -> fits when empty

    def check(self, job: JobRequest) -> None:
        """Raise RequestError if ``job`` could not be placed even with every GPU of the cluster free and
        healthy (it would wait forever). A query: it changes nothing."""
        key = (shape_key(job), job.vc)
        fits = self.memo.get(key)
        if fits is None:
            validate_request(self.core, job)  # (a remembered shape was valid; submit validates the rest again)
            fits = self.fits_when_empty(job)
            if len(self.memo) >= MEMO_SIZE:
                self.memo.clear()
            self.memo[key] = fits
        if fits:
            return
        shape = ", ".join(f"{t.count} x {t.gpus} GPU{'s' if t.gpus != 1 else ''}"
                          f"{' ' + t.gpu_type if t.gpu_type else ''} ({t.name})" for t in job.tasks)
        extra = f" within one {job.within}" if job.within else ""
        if job.priority == -1:
            raise RequestError("tasks", f"the job's tasks ({shape}){extra} can never all run at once: they do not "
                               f"fit even on the empty cluster ({self.core.gpu_count()} GPUs); ask for fewer or "
                               "smaller tasks")
        raise RequestError("tasks", f"the job's tasks ({shape}){extra} can never all run at once in VC {job.vc}: they "
                           "do not fit in its guaranteed cells even when all are free; ask for fewer or smaller "
                           "tasks, or submit as opportunistic")

    def fits_when_empty(self, job: JobRequest) -> bool:
        twin = self.twin
        if twin is None:
            twin = self.twin = self.core.fork(starvation_after=None)
        j = Job(job, 0)
        if job_share(job):  # a share fits wherever a one-GPU task does
            j = share_proxy(j)
        with twin.trial(j) as txn:  # (undone: the twin stays empty)
            if job.priority == -1:
                res = place_opportunistic(twin.state, j, txn)
            else:
                res = twin.placement.place(j, FREE, txn)
        if twin.free_gpu_count() != twin.gpu_count():  # never trust a twin the try left changed
            self.twin = None
        return res is not None
