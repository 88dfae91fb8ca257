"""Checks that reject a job request the cluster can never accept (RequestError, nothing changed)."""

from __future__ import annotations

from .errors import RequestError
from .shares import SHARE_SIZES
from .types import JobRequest, TaskGroup


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate_request(s, req: JobRequest, as_opportunistic: bool = False, new: bool = True) -> None:
    """Raise RequestError if ``req`` can never run on scheduler ``s``. ``as_opportunistic``: it will run
    opportunistically whatever its priority (a demoted job being adopted), so its VC's guarantee does not
    bound it. ``new=False``: a job ``s`` knows already (reconfiguration checks it against the new config)."""
    st = s.state
    if not isinstance(req.id, str) or not req.id:
        raise RequestError("id", "a job needs a non-empty string id")
    if new and req.id in s.job_table:
        raise RequestError("id", f"job {req.id} already exists; use a new id")
    if req.vc not in st.vcs:
        raise RequestError("vc", f"unknown VC {req.vc!r} (VCs: {', '.join(st.vc_order) or 'none'})")
    p = req.priority
    if isinstance(p, bool) or not isinstance(p, int) or not (p == -1 or 0 <= p <= 1000):
        raise RequestError("priority", f"must be an integer 0..1000 (guaranteed) or -1 (opportunistic), got {p!r}")
    if not isinstance(req.user, str):
        raise RequestError("user", f"must be a string, got {req.user!r}")
    if not _num(req.submit_time):
        raise RequestError("submit_time", f"must be a number, got {req.submit_time!r}")
    if req.time_limit_s is not None and (not _num(req.time_limit_s) or not req.time_limit_s > 0):
        raise RequestError("time_limit_s", f"must be a positive number of seconds or null, got {req.time_limit_s!r}")
    if not isinstance(req.lazy_preemption, bool):
        raise RequestError("lazy_preemption", f"must be true or false, got {req.lazy_preemption!r}")
    if not req.tasks:
        raise RequestError("tasks", "a job needs at least one task group")
    key = _shape_key(req, as_opportunistic)
    known = st.valid_shapes
    if key is not None and key in known:
        return  # the rest depends only on the request's shape and the config: this shape passed before
    _check_shape(s, req, as_opportunistic)
    if key is not None:
        if len(known) >= 4096:
            known.clear()
        known[key] = None


def _shape_key(req: JobRequest, as_opportunistic: bool):
    """Everything of ``req`` that ``_check_shape`` reads, with the types it checks (1, 1.0 and True are
    equal keys but not equally valid); None when a part cannot be a key (it is checked every time)."""
    try:
        key = (tuple((type(t), t.name, type(t.name), t.count, type(t.count), t.gpus, type(t.gpus), t.gpu_type,
                      t.cpus, type(t.cpus), t.memory_mb, type(t.memory_mb)) for t in req.tasks),
               req.vc, req.priority == -1, as_opportunistic, req.pinned_cell, req.within)
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


def _check_shape(s, req: JobRequest, as_opportunistic: bool) -> None:
    """The checks of ``validate_request`` that depend only on the request's tasks, VC, kind (guaranteed or
    opportunistic), pinned cell and ``within``, and on the cluster config."""
    st = s.state
    p = req.priority
    names = set()
    gpu_types = st.chain_gpu.values()
    max_cpus, max_mem = st.max_node_resources
    for i, t in enumerate(req.tasks):
        if not isinstance(t, TaskGroup):
            raise RequestError(f"tasks[{i}]", "must be a TaskGroup")
        if not isinstance(t.name, str) or not t.name:
            raise RequestError(f"tasks[{i}].name", "a task group needs a non-empty name")
        if t.name in names:
            raise RequestError(f"tasks[{i}].name", f"task group name {t.name!r} is used twice")
        names.add(t.name)
        if isinstance(t.count, bool) or not isinstance(t.count, int) or t.count < 1:
            raise RequestError(f"tasks[{i}].count", f"must be a positive integer, got {t.count!r}")
        if isinstance(t.gpus, float) and 0 < t.gpus < 1:
            if t.gpus not in SHARE_SIZES:
                raise RequestError(f"tasks[{i}].gpus", f"a share of a GPU must be 0.5, 0.25 or 0.125, got {t.gpus!r}")
            if t.count != 1 or len(req.tasks) != 1:
                raise RequestError(f"tasks[{i}].gpus", "a share of a GPU (0.5, 0.25, 0.125) is one task on one GPU: "
                                   "a job of several tasks asks for whole GPUs")
            if req.within is not None:
                raise RequestError("within", "a share of a GPU is one task on one GPU; drop 'within'")
        elif isinstance(t.gpus, bool) or not isinstance(t.gpus, int) or t.gpus < 0:
            raise RequestError(f"tasks[{i}].gpus", f"must be an integer >= 0 (0 = CPU-only) or a share of one GPU "
                               f"(0.5, 0.25, 0.125), got {t.gpus!r}")
        if not _num(t.cpus) or t.cpus < 0:
            raise RequestError(f"tasks[{i}].cpus", f"must be a number >= 0, got {t.cpus!r}")
        if isinstance(t.memory_mb, bool) or not isinstance(t.memory_mb, int) or t.memory_mb < 0:
            raise RequestError(f"tasks[{i}].memory_mb", f"must be an integer >= 0, got {t.memory_mb!r}")
        if t.cpus > max_cpus:
            raise RequestError(f"tasks[{i}].cpus", f"asks for {t.cpus} CPUs per task but the largest node has {max_cpus}")
        if t.memory_mb > max_mem:
            raise RequestError(f"tasks[{i}].memory_mb", f"asks for {t.memory_mb} MB per task but the largest node has {max_mem}")
        if t.gpu_type is not None and t.gpu_type not in gpu_types:
            raise RequestError(f"tasks[{i}].gpu_type", f"no GPU type {t.gpu_type!r} in this cluster (types: {', '.join(sorted(gpu_types))})")
        if t.gpus == 0 and (t.cpus == 0 and t.memory_mb == 0):
            raise RequestError(f"tasks[{i}]", "a CPU-only task (gpus=0) must ask for cpus or memory_mb")

    guaranteed = p != -1 and not as_opportunistic
    vc = st.vcs[req.vc]
    if req.pinned_cell is not None:
        if req.pinned_cell not in vc.pins:
            raise RequestError("pinned_cell", f"VC {req.vc} has no pinned cell {req.pinned_cell!r} "
                               f"(its pinned cells: {', '.join(sorted(vc.pins)) or 'none'})")
        if p == -1:
            raise RequestError("pinned_cell", "pinned cells hold guaranteed work only; use a priority 0..1000")
    if req.within is not None:
        if req.within not in st.types or st.types[req.within].child_type is None:
            kinds = sorted(n for n, t in st.types.items() if t.child_type is not None)
            raise RequestError("within", f"unknown cell type {req.within!r} (cell types: {', '.join(kinds)})")

    for i, t in enumerate(req.tasks):
        if t.gpus == 0:
            continue
        chains = st.chains if t.gpu_type is None else [c for c in st.chains if st.chain_gpu[c] == t.gpu_type]
        if req.within is not None:
            chains = [c for c in chains if req.within in s.config.chains[c].types]
            if not chains:
                raise RequestError("within", f"cell type {req.within} holds no {t.gpu_type or 'GPU'} for task group {t.name}")
        if req.pinned_cell is not None:
            pin = vc.pins[req.pinned_cell]
            chains = [c for c in chains if c == pin.chain]
            if not chains:
                raise RequestError(f"tasks[{i}].gpu_type", f"pinned cell {req.pinned_cell} holds {st.chain_gpu[pin.chain]} GPUs")
        node_max = max((st.types[s.config.chains[c].node_type].leaf_count for c in chains), default=0)
        if t.gpus > node_max:
            raise RequestError(f"tasks[{i}].gpus", f"asks for {t.gpus} GPUs in one task but the cluster has {s.config.gpu_count()} GPUs in all" if t.gpus > s.config.gpu_count() else f"asks for {t.gpus} GPUs in one task but the largest node has {node_max}"
                               f"{' ' + t.gpu_type if t.gpu_type else ''}; split it into more tasks of fewer GPUs")
        if guaranteed and req.pinned_cell is None:
            vchains = [c for c in chains if vc.total.get(c)]
            if not vchains:
                raise RequestError(f"tasks[{i}].gpu_type", f"VC {req.vc} has no guaranteed "
                                   f"{t.gpu_type or 'GPU'} cells; ask for a type it has or submit as opportunistic (priority -1)")
            fits = False
            for c in vchains:
                lvl = st.task_level(c, t.gpus)
                if lvl is not None and any(r.level >= lvl for r in vc.roots[c]):
                    fits = True
            if not fits:
                biggest = max(r.size for c in vchains for r in vc.roots[c])
                raise RequestError(f"tasks[{i}].gpus", f"VC {req.vc}'s largest guaranteed cell holds {biggest} GPUs, "
                                   f"so a task of {t.gpus} GPUs can never be placed in it; use smaller tasks (an admin gives "
                                   f"the VC bigger cells with the cluster config's levels, e.g. levels: [pair])")
        if guaranteed and req.pinned_cell is not None:
            lvl = st.task_level(vc.pins[req.pinned_cell].chain, t.gpus)
            if lvl is None or lvl > vc.pins[req.pinned_cell].level:
                raise RequestError(f"tasks[{i}].gpus", f"pinned cell {req.pinned_cell} cannot hold a task of {t.gpus} GPUs")

    total = req.total_gpus
    if req.within is not None:
        size = st.types[req.within].leaf_count
        if total > size:
            raise RequestError("within", f"the job needs {total} GPUs but one {req.within} holds {size}")
        if guaranteed:
            wl = st.types[req.within].level
            ok = any(r.level >= wl for c, roots in vc.roots.items() if req.within in s.config.chains[c].types for r in roots)
            if req.pinned_cell is not None:
                ok = vc.pins[req.pinned_cell].level >= wl
            if not ok:
                raise RequestError("within", f"VC {req.vc} has no guaranteed cell as large as {req.within}; "
                                   "drop 'within' or ask for a smaller cell type")
    if guaranteed and total:
        if req.pinned_cell is not None:
            cap = vc.pins[req.pinned_cell].size
            where = f"pinned cell {req.pinned_cell}"
        else:
            types = {t.gpu_type for t in req.tasks if t.gpus and t.gpu_type}
            cap = sum(n for c, n in vc.total.items() if not types or st.chain_gpu[c] in types)
            where = f"VC {req.vc}"
        if total > cap:
            raise RequestError("tasks", f"the job needs {total} GPUs but {where} guarantees only {cap}; "
                               "ask for fewer GPUs or submit as opportunistic (priority -1)")
