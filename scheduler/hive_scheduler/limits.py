"""Per-user limits inside a VC (Slurm's QOS limits, per VC): plain data and the admission gate's checks.

A VC's ``LimitTable`` has a ``default``, per-``groups`` and per-``users`` entries, each a ``UserLimits``
(every key optional: ``None`` = no limit). A user's effective limit is decided key by key, the most
specific entry that sets the key winning: the user's own entry, else their groups' (a user in several
groups gets the most generous value among the groups that set it), else the default, else no limit.

Two kinds of checks use them:
- ``refusal``: a job that can never run under its owner's limits (more GPUs than ``max_gpus``, a
  priority above ``max_priority``, a time limit above ``max_time_limit_s``) is refused at submit;
- ``LimitTable.blocking`` (the core's admission gate): a job whose start would take its owner over
  ``max_gpus``, ``max_running_jobs`` or ``max_kernels`` waits, with a reason naming the limit,
  while other users' jobs behind it may start.
``max_queued_jobs`` is checked at submit (the caller counts its waiting jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

LIMIT_KEYS = ("max_gpus", "max_running_jobs", "max_kernels", "max_queued_jobs", "max_priority", "max_time_limit_s")


class LimitsError(ValueError):
    """A malformed limits document; ``field`` names the offending key (e.g. ``users.ann.max_gpus``)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class UserLimits:
    """What one user may use in one VC; ``None`` = no limit."""

    max_gpus: int | None = None            # GPUs held at once by started jobs (running or preempting)
    max_running_jobs: int | None = None    # started jobs at once
    max_kernels: int | None = None         # started notebook kernels holding GPUs at once
    max_queued_jobs: int | None = None     # waiting jobs at once (checked at submit)
    max_priority: int | None = None        # highest priority a job may ask for
    max_time_limit_s: int | None = None    # longest time limit a job may ask for (seconds)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "") -> "UserLimits":
        """Checked whole: unknown keys and values that are not integers >= 0 raise LimitsError."""
        if d is None:
            return cls()
        if isinstance(d, UserLimits):
            return d
        if not isinstance(d, Mapping):
            raise LimitsError(f"{where or 'limits'} must be an object of limits ({', '.join(LIMIT_KEYS)})", where or None)
        values: dict[str, int | None] = {}
        for key, value in d.items():
            name = f"{where}.{key}" if where else str(key)
            if key not in LIMIT_KEYS:
                raise LimitsError(f"{name}: unknown limit {key!r}; use {', '.join(LIMIT_KEYS)}", name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise LimitsError(f"{name} must be an integer >= 0 (or null for no limit), got {value!r}", name)
            if value < 0:
                raise LimitsError(f"{name} must be >= 0 (or null for no limit), got {value}", name)
            values[key] = value
        return cls(**values)

    def to_dict(self) -> dict[str, int]:
        """The keys that are set (JSON-ready)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def __bool__(self) -> bool:
        return any(getattr(self, k) is not None for k in LIMIT_KEYS)


@dataclass(frozen=True)
class Usage:
    """What a user's started jobs hold in one VC."""

    gpus: int = 0
    running_jobs: int = 0
    kernels: int = 0


def is_gpu_kernel(req) -> bool:
    """A notebook kernel holding GPUs (what ``max_kernels`` counts)."""
    return getattr(req, "kind", "batch") == "kernel" and req.total_gpus > 0


def owner_groups(req) -> tuple[str, ...]:
    """The groups of a job's owner: ``req.groups``, else its one fair-share ``group``."""
    groups = tuple(getattr(req, "groups", ()) or ())
    if not groups and getattr(req, "group", ""):
        groups = (req.group,)
    return groups


@dataclass(frozen=True)
class LimitTable:
    """One VC's limits: ``default``, per group and per user (see the module docstring)."""

    default: UserLimits = field(default_factory=UserLimits)
    groups: Mapping[str, UserLimits] = field(default_factory=dict)
    users: Mapping[str, UserLimits] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "LimitTable":
        """From ``{"default": {...}, "groups": {g: {...}}, "users": {u: {...}}}``; LimitsError naming the key."""
        if d is None:
            return cls()
        if isinstance(d, LimitTable):
            return d
        if not isinstance(d, Mapping):
            raise LimitsError('limits must be an object: {"default": {...}, "groups": {...}, "users": {...}}')
        for key in d:
            if key not in ("default", "groups", "users"):
                raise LimitsError(f"{key}: unknown key {key!r}; use default, groups and users", str(key))
        default = UserLimits.from_dict(d.get("default"), "default")
        tables = []
        for part in ("groups", "users"):
            raw = d.get(part) or {}
            if not isinstance(raw, Mapping):
                raise LimitsError(f"{part} must be an object mapping names to limits", part)
            table = {}
            for name in sorted(raw):
                if not isinstance(name, str) or not name:
                    raise LimitsError(f"{part}: names must be non-empty strings, got {name!r}", part)
                table[name] = UserLimits.from_dict(raw[name], f"{part}.{name}")
            tables.append(table)
        return cls(default=default, groups=tables[0], users=tables[1])

    def to_dict(self) -> dict[str, Any]:
        return {"default": self.default.to_dict(),
                "groups": {g: lim.to_dict() for g, lim in sorted(self.groups.items())},
                "users": {u: lim.to_dict() for u, lim in sorted(self.users.items())}}

    def __bool__(self) -> bool:
        return bool(self.default) or any(self.groups.values()) or any(self.users.values())

    def resolve(self, user: str, groups: Iterable[str] = ()) -> UserLimits:
        """The limits in effect for ``user`` (member of ``groups``): key by key, user > groups (most
        generous) > default."""
        mine = self.users.get(user)
        theirs = [self.groups[g] for g in sorted(set(groups)) if g in self.groups]
        out: dict[str, int | None] = {}
        for key in LIMIT_KEYS:
            value = getattr(mine, key) if mine is not None else None
            if value is None:
                values = [getattr(g, key) for g in theirs if getattr(g, key) is not None]
                value = max(values) if values else getattr(self.default, key)
            out[key] = value
        return UserLimits(**out)


def refusal(limits: UserLimits, vc: str, *, gpus: int, priority: int, time_limit_s: float | None = None,
            kind: str = "batch") -> tuple[str, str] | None:
    """(field, message) when a job can never run under ``limits`` (so it is refused at submit), else None.

    ``max_time_limit_s``: a batch job must ask for a time limit within it; a notebook kernel without one
    is let through (the idle culler and ``max_kernels`` bound kernels)."""
    if limits.max_gpus is not None and gpus > limits.max_gpus:
        return "tasks", (f"the job asks for {_plural(gpus, 'GPU')} but you may hold at most "
                         f"{_plural(limits.max_gpus, 'GPU')} in VC {vc}; ask for fewer GPUs (or ask an admin to raise your limit)")
    if limits.max_priority is not None and priority > limits.max_priority:
        return "priority", (f"priority {priority} is above your limit in VC {vc} ({limits.max_priority}); "
                            f"ask for priority {limits.max_priority} or less")
    if limits.max_time_limit_s is not None:
        if time_limit_s is None and kind != "kernel":
            return "time_limit_s", (f"VC {vc} allows you jobs of at most {limits.max_time_limit_s} s; "
                                    f"set time_limit_s to {limits.max_time_limit_s} or less")
        if time_limit_s is not None and time_limit_s > limits.max_time_limit_s:
            return "time_limit_s", (f"time_limit_s {time_limit_s:g} is above your limit in VC {vc} "
                                    f"({limits.max_time_limit_s} s); ask for {limits.max_time_limit_s} s or less")
    return None


def queue_refusal(limits: UserLimits, vc: str, waiting: int) -> str | None:
    """The message when a user who has ``waiting`` jobs queued in ``vc`` may not queue another."""
    if limits.max_queued_jobs is not None and waiting >= limits.max_queued_jobs:
        return (f"you have {waiting} of your {_plural(limits.max_queued_jobs, 'queued job')} in VC {vc}; "
                "submit again when one of them has started or been cancelled")
    return None


def blocking(limits: UserLimits, vc: str, use: Usage, req) -> tuple[str, str] | None:
    """(limit key, reason) when starting ``req`` now would take its owner over a limit, else None."""
    need = req.total_gpus
    if limits.max_gpus is not None and need and use.gpus + need > limits.max_gpus:
        if need > limits.max_gpus:
            return "max_gpus", (f"needs {_plural(need, 'GPU')} but you may hold at most {limits.max_gpus} in {vc} "
                                "(your limit was lowered); an admin must raise it, or cancel this job")
        if use.gpus >= limits.max_gpus:
            return "max_gpus", (f"you hold {use.gpus} of your {_plural(limits.max_gpus, 'GPU')} in {vc}; "
                                "the next starts when one of yours ends")
        return "max_gpus", (f"you hold {use.gpus} of your {_plural(limits.max_gpus, 'GPU')} in {vc} and this job "
                            f"needs {need}; it starts when yours free enough")
    if limits.max_running_jobs is not None and use.running_jobs >= limits.max_running_jobs:
        return "max_running_jobs", (f"you run {use.running_jobs} of your {_plural(limits.max_running_jobs, 'running job')} "
                                    f"in {vc}; the next starts when one of yours ends")
    if limits.max_kernels is not None and is_gpu_kernel(req) and use.kernels >= limits.max_kernels:
        return "max_kernels", (f"you have {use.kernels} of your {_plural(limits.max_kernels, 'GPU kernel')} in {vc}; "
                               "the next starts when one of yours is shut down")
    return None
