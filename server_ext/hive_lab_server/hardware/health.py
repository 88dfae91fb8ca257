"""Hardware health rules: GPU samples in, HealthEvents (this GPU is bad, and why) out.

A GPU marked bad stays bad until an admin marks it healthy again (after a reset or a repair): the
rules never flip it back by themselves, so a flapping GPU is not handed out between two failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from hive_lab_server.hardware.sampler import GpuSample

# XIDs that mean the GPU (not the program) is in trouble, with what NVIDIA's XID catalogue says.
CRITICAL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}


@dataclass(frozen=True)
class HealthEvent:
    node: str
    gpu: int | None  # None: the whole node
    healthy: bool
    reason: str

    def to_json(self) -> dict:
        return {"node": self.node, "gpu": self.gpu, "healthy": self.healthy, "reason": self.reason}


@dataclass
class HealthRules:
    critical_xids: dict[int, str] = field(default_factory=lambda: dict(CRITICAL_XIDS))
    max_retired_pages: int = 60  # NVIDIA's RMA threshold for page retirement
    nvml_error_streak: int = 3  # consecutive unreadable samples before a GPU is called bad
    uncorrected_ecc_at_start_is_bad: bool = True  # volatile counts: errors since the driver loaded


@dataclass
class _GpuState:
    ecc_baseline: int | None = None
    error_streak: int = 0
    bad_reason: str | None = None
    last: GpuSample | None = None


class HealthMonitor:
    """Remembers per-GPU baselines; ``observe()`` returns only new transitions to bad."""

    def __init__(self, rules: HealthRules | None = None):
        self.rules = rules or HealthRules()
        self._gpus: dict[tuple[str, int], _GpuState] = {}

    def bad(self) -> dict[tuple[str, int], str]:
        return {key: st.bad_reason for key, st in sorted(self._gpus.items()) if st.bad_reason}

    def observe(self, samples: Iterable[GpuSample]) -> list[HealthEvent]:
        events = []
        for s in samples:
            st = self._gpus.setdefault((s.node, s.index), _GpuState())
            reason = self._verdict(s, st)
            st.last = s
            if reason and not st.bad_reason:
                st.bad_reason = reason
                events.append(HealthEvent(s.node, s.index, False, reason))
        return events

    def mark_bad(self, node: str, gpu: int, reason: str) -> HealthEvent:
        st = self._gpus.setdefault((node, gpu), _GpuState())
        st.bad_reason = reason
        return HealthEvent(node, gpu, False, reason)

    def mark_healthy(self, node: str, gpu: int, reason: str = "marked healthy by an admin") -> HealthEvent:
        """Forget the failure; counters seen so far become the new baseline."""
        st = self._gpus.setdefault((node, gpu), _GpuState())
        st.bad_reason = None
        st.error_streak = 0
        if st.last is not None and st.last.ecc_uncorrected is not None:
            st.ecc_baseline = st.last.ecc_uncorrected
        return HealthEvent(node, gpu, True, reason)

    def _verdict(self, s: GpuSample, st: _GpuState) -> str | None:
        """The first rule this sample breaks, as a sentence, or None."""
        rules = self.rules
        reasons = []
        for xid in s.xids:
            if xid in rules.critical_xids:
                reasons.append(f"XID {xid} ({rules.critical_xids[xid]})")
        if s.lost:
            reasons.append(f"GPU fell off the bus (NVML: {s.error})")
        elif s.error is not None:
            st.error_streak += 1
            if st.error_streak >= rules.nvml_error_streak:
                reasons.append(f"NVML cannot read the GPU ({s.error}) in {st.error_streak} samples in a row")
        else:
            st.error_streak = 0
        if s.ecc_uncorrected is not None:
            if st.ecc_baseline is None:
                st.ecc_baseline = 0 if rules.uncorrected_ecc_at_start_is_bad else s.ecc_uncorrected
            if s.ecc_uncorrected > st.ecc_baseline:
                reasons.append(f"{s.ecc_uncorrected - st.ecc_baseline} uncorrectable ECC error(s)")
                st.ecc_baseline = s.ecc_uncorrected
        if s.remap_failure:
            reasons.append("row remapping failed (the GPU needs repair)")
        if s.remap_pending:
            reasons.append("row remapping pending (the GPU needs a reset)")
        if s.retired_pages_pending:
            reasons.append("page retirement pending (the GPU needs a reset)")
        retired = (s.retired_pages_sbe or 0) + (s.retired_pages_dbe or 0)
        if retired >= rules.max_retired_pages:
            reasons.append(f"{retired} memory pages retired (limit {rules.max_retired_pages})")
        return "; ".join(reasons) or None
