"""The throughput matrix: job type x GPU type x scale factor -> steps/s, read from Gavel's JSON.

Gavel's file maps ``gpu -> "('<job type>', <scale factor>)" -> {"null": steps/s, "('<other>', sf)":
[own, other's] when co-located}``. GPU type names are matched case-insensitively (``V100`` in a
cluster is ``v100`` in the file); the ``*_unconsolidated`` entries are kept under their own names.

The shipped file (1.2 MB, nearly all of it co-located pairs) is read in two parts: its isolated steps/s
from ``simulation_throughputs.isolated.json`` (26 kB, the same numbers: :func:`isolated_doc`; a test
compares the two), and the pairs from the whole file the first time a policy asks for one (packing):
decoding the whole file took ~9 ms of every ``hive-lab simulate`` run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

JobKey = tuple[str, int]  # (job type, scale factor)

BUILTIN = os.path.join(os.path.dirname(__file__), "data", "simulation_throughputs.json")
BUILTIN_ISOLATED = os.path.join(os.path.dirname(__file__), "data", "simulation_throughputs.isolated.json")


class ThroughputError(ValueError):
    """The throughput file is unreadable, or a job type / GPU type is missing from it."""


_KEY = re.compile(r"""\((['"])(.+)\1,\s*(\d+)\)""")


def _parse_key(raw: str, where: str, cache: dict[str, JobKey]) -> JobKey:
    key = cache.get(raw)
    if key is None:
        m = _KEY.fullmatch(raw)
        if m is None or int(m.group(3)) < 1:
            raise ThroughputError(f"{where}: key {raw!r} is not \"('<job type>', <scale factor>)\"")
        key = cache[raw] = (m.group(2), int(m.group(3)))
    return key


@dataclass
class Throughputs:
    """Isolated steps/s (``isolated[gpu][(job_type, sf)]``) and co-located pairs (``paired``)."""

    isolated: dict[str, dict[JobKey, float]]
    paired: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = field(default_factory=dict)
    source: str = ""
    # the file's co-located entries, read on first use (most runs never pack jobs): gpu -> job key -> entry
    raw_pairs: dict[str, dict[JobKey, dict]] = field(default_factory=dict, repr=False, compare=False)
    # where raw_pairs come from when they are not read yet (the whole file, for the shipped one's split)
    pairs_from: str = field(default="", repr=False, compare=False)

    @property
    def gpu_types(self) -> list[str]:
        return sorted(self.isolated)

    def gpu_type(self, name: str) -> str:
        """The file's spelling of GPU type ``name`` (case-insensitive)."""
        key = name.lower()
        if key not in self.isolated:
            raise ThroughputError(f"GPU type {name!r} is not in {self.source or 'the throughput file'} "
                                  f"(it has {', '.join(self.gpu_types)})")
        return key

    def get(self, job_type: str, scale_factor: int, gpu: str) -> float:
        """Steps/s of ``job_type`` on ``scale_factor`` GPUs of type ``gpu``."""
        table = self.isolated[self.gpu_type(gpu)]
        try:
            return table[(job_type, scale_factor)]
        except KeyError:
            raise ThroughputError(f"no throughput for job type {job_type!r} at scale factor {scale_factor} "
                                  f"on {gpu} in {self.source or 'the throughput file'}") from None

    def pair(self, a: JobKey, b: JobKey, gpu: str) -> tuple[float, float] | None:
        """Steps/s of ``a`` and ``b`` sharing the same GPUs of type ``gpu``, or None if not measured."""
        gpu = self.gpu_type(gpu)
        if self.pairs_from:
            self.raw_pairs = _read(self.pairs_from).raw_pairs
            self.pairs_from = ""
        known = self.paired.setdefault(gpu, {})
        if (a, b) not in known:
            entry = self.raw_pairs.get(gpu, {}).get(a, {})
            both = entry.get(repr(b))  # Gavel writes the other job's key as str((type, scale factor))
            ok = (isinstance(both, list) and len(both) == 2
                  and all(isinstance(v, (int, float)) and v >= 0 for v in both))
            known[(a, b)] = (float(both[0]), float(both[1])) if ok else None
        return known[(a, b)]

    def job_types(self) -> list[JobKey]:
        return sorted({k for table in self.isolated.values() for k in table})


def parse_throughputs(doc: object, source: str = "") -> Throughputs:
    if not isinstance(doc, dict) or not doc:
        raise ThroughputError(f"{source}: expected an object {{gpu type: {{job key: {{...}}}}}}")
    isolated: dict[str, dict[JobKey, float]] = {}
    raw_pairs: dict[str, dict[JobKey, dict]] = {}
    cache: dict[str, JobKey] = {}
    for gpu, jobs in doc.items():
        name = str(gpu).lower()
        if name in isolated:
            raise ThroughputError(f"{source}: GPU type {gpu!r} appears twice (names are case-insensitive)")
        if not isinstance(jobs, dict):
            raise ThroughputError(f"{source}: {gpu}: expected an object of job keys")
        iso: dict[JobKey, float] = {}
        raw: dict[JobKey, dict] = {}
        for raw_key, entry in jobs.items():
            where = f"{source}: {gpu}"
            key = _parse_key(raw_key, where, cache)
            if not isinstance(entry, dict) or "null" not in entry:
                raise ThroughputError(f"{where}: {raw_key}: expected an object with a \"null\" entry (isolated steps/s)")
            value = entry["null"]
            if not isinstance(value, (int, float)) or value < 0:
                raise ThroughputError(f"{where}: {raw_key}: isolated steps/s must be a number >= 0, got {value!r}")
            iso[key] = float(value)
            raw[key] = entry
        isolated[name] = iso
        raw_pairs[name] = raw
    return Throughputs(isolated, {}, source, raw_pairs)


def isolated_doc(doc: dict) -> dict:
    """Gavel's throughput document with its isolated steps/s only (what ``simulation_throughputs.isolated.json``
    holds): ``gpu -> "('<job type>', <scale factor>)" -> steps/s``, in the file's order and spelling."""
    return {gpu: {key: float(entry["null"]) for key, entry in jobs.items()} for gpu, jobs in doc.items()}


def load_throughputs(path: str | None = None) -> Throughputs:
    """Read Gavel's throughput JSON; ``None`` or ``"gavel"`` reads the copy shipped with hive-lab."""
    if path in (None, "gavel"):
        if os.path.isfile(BUILTIN_ISOLATED):
            with open(BUILTIN_ISOLATED, encoding="utf-8") as f:
                doc = json.load(f)
            got = parse_throughputs({gpu: {key: {"null": v} for key, v in jobs.items()} for gpu, jobs in doc.items()},
                                    BUILTIN)
            got.raw_pairs = {}
            got.pairs_from = BUILTIN
            return got
        path = BUILTIN
    return _read(path)


def _read(path: str) -> Throughputs:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ThroughputError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ThroughputError(f"{path}: not JSON ({exc})") from None
    return parse_throughputs(doc, path)
