"""Which NVML to talk to: the real ``pynvml`` module or the fake one, chosen by a short spec string.

Specs (the service's ``nvml_backend`` trait, the CLI, the capture script):

- ``"auto"`` / ``"pynvml"`` / ``""``: the real library (``nvidia-ml-py``);
- ``"fake:/path/to/description.yaml"``: :class:`~.fake_nvml.FakeNvml` driven by that file;
- ``"none"``: no NVML (the service uses a declared or simulated cluster).

Everything else in this package only calls the pynvml functions listed in the package docstring, on
whatever object :func:`load_backend` returns, so both backends are interchangeable.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

import pynvml

from hive_lab_server.hardware.fake_nvml import FakeNvml

log = logging.getLogger(__name__)

NVMLError = pynvml.NVMLError  # the fake raises the very same classes


class BackendError(ValueError):
    """The backend spec is malformed (the message says what a valid spec looks like)."""


def load_backend(spec: str | None = "auto", clock=None) -> Any | None:
    """Return an object with pynvml's API for ``spec``, or None for ``"none"``."""
    spec = (spec or "auto").strip()
    if spec in ("auto", "pynvml", "real"):
        return pynvml
    if spec == "none":
        return None
    if spec.startswith("fake:"):
        path = spec[len("fake:"):]
        if not path:
            raise BackendError("nvml_backend 'fake:' needs a hardware description path, e.g. fake:/etc/hive-lab/hw.yaml")
        return FakeNvml(path, clock=clock)
    raise BackendError(f"nvml_backend {spec!r}: use 'auto', 'none' or 'fake:/path/to/description.yaml'")


def try_init(nvml: Any) -> bool:
    """nvmlInit; False (logged) when the library or driver is missing, as on machines without GPUs."""
    if nvml is None:
        return False
    try:
        nvml.nvmlInit()
        return True
    except NVMLError as exc:
        log.info("NVML not available (%s): no local GPUs discovered", exc)
        return False
    except OSError as exc:  # a broken libnvidia-ml
        log.info("NVML could not be loaded (%s): no local GPUs discovered", exc)
        return False


@contextlib.contextmanager
def nvml_session(nvml: Any) -> Iterator[bool]:
    """``with nvml_session(nvml) as ok:``: init/shutdown around a block; ``ok`` False when unavailable."""
    ok = try_init(nvml)
    try:
        yield ok
    finally:
        if ok:
            with contextlib.suppress(NVMLError):
                nvml.nvmlShutdown()


def text(value: Any) -> str:
    """NVML strings come back as ``str`` from the API functions but ``bytes`` from struct fields."""
    return value.decode(errors="replace") if isinstance(value, (bytes, bytearray)) else str(value)


def normalize_bus_id(value: Any) -> str:
    """``"00000000:07:00.0"`` and ``"0000:07:00.0"`` name the same device: compare the short, upper form."""
    s = text(value).strip().upper()
    domain, _, rest = s.partition(":")
    if not rest:
        return s
    return f"{int(domain, 16):04X}:{rest}"
