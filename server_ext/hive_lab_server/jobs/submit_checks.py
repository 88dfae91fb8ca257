"""The checks every new job passes before the service admits it, whoever submits it: a ``POST jobs``
request, or a recurring job firing under its owner's identity (pipelines/schedules.py).

``checked_submission`` resolves the VC, then checks the owner may submit there, has an account jobs
can run as, asks for nothing the launcher can never run, and names only jobs it may depend on. It
raises ``ServiceError`` (4xx, with the field) and changes nothing.
"""

from __future__ import annotations

from typing import Any

from hive_lab_server.auth.access import Caller
from hive_lab_server.errors import ServiceError
from hive_lab_server.execution.launchers.base import UnsupportedSpec
from hive_lab_server.wire.spec import JobSpec


def checked_submission(*, service: Any, access: Any, caller: Caller, spec: JobSpec) -> tuple[JobSpec, str]:
    """(the spec, with ``vc`` set where a platform's form asks for it, the VC it goes to)."""
    vcs = access.all_vcs
    vc = spec.vc
    if vc == "@default":  # a platform's "default" VC/queue/partition: the one this caller gets by default
        vc = "default" if "default" in vcs else None
        spec = spec.model_copy(update={"vc": vc})
    if vc is None:
        if not caller.vcs:
            raise ServiceError(403, f"user {caller.user} may not submit to any VC; ask an admin to map them in HiveLabApp.vc_access", "vc")
        vc = caller.vcs[0]
        if spec.source is not None:  # the job's platform variables name its VC
            spec = spec.model_copy(update={"vc": vc})
    elif vc not in vcs:
        raise ServiceError(400, f"vc: VC {vc!r} does not exist; use one of: {', '.join(vcs)}", "vc")
    if not caller.may_submit(vc):
        mine = ", ".join(caller.vcs) or "none"
        raise ServiceError(403, f"user {caller.user} may not submit to VC {vc}; your VCs: {mine}", "vc")
    refusal = service.launcher.run_as_refusal(caller.user)  # no Unix account, or root: refused before queueing
    if refusal:
        raise ServiceError(403, refusal, "user")
    try:  # what the configured launcher can never run (e.g. an image under the local launcher)
        service.launcher.validate(spec)
    except UnsupportedSpec as exc:
        raise ServiceError(400, exc.message, exc.field) from None
    if spec.depends_on:  # only jobs that exist (no cycle can form) and, unless an admin, the caller's own
        service.dependencies.check_submit(spec.depends_on, caller.user, caller.admin)
    return spec, vc
