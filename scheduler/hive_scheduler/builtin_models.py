"""Built-in cluster models: ``default`` (one 4-GPU machine), ``philly`` (2,816 GPUs), ``big20k``."""

from __future__ import annotations

import copy
from typing import Any

from .shortform import expand_short_form

# Philly's 11 VCs and their node counts (Helios artifact's philly_vc.csv; see shared/traces/README.md).
PHILLY_VCS = {
    "6214e9": 64, "b436b2": 64, "ee9e8c": 64, "7f04ca": 32, "6c71a0": 32, "0e4a51": 32,
    "11cb48": 16, "e13805": 16, "2869ce": 16, "ed69ec": 8, "103959": 8,
}

_SHORT: dict[str, dict[str, Any]] = {
    # One workstation with 4 simulated GPUs in NVLink pairs; one VC owning all of it.
    "default": {"nodes": 1, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"],
                "vcs": {"default": 4}},
    # Philly: 352 nodes x 8 GPUs (24 GB, P40-class), GPU -> pair -> socket(4) -> node(8) -> rack(16 nodes).
    "philly": {"nodes": 352, "gpus_per_node": 8, "gpu_type": "P40", "levels": ["pair", "socket"],
               "racks": 22, "cpus_per_node": 48, "memory_mb_per_node": 458752,
               "vcs": {vc: n * 8 for vc, n in PHILLY_VCS.items()}},
    # 20,000 GPUs: 2,500 nodes x 8 in 100 racks of 25 nodes, 10 VCs holding whole racks.
    "big20k": {"nodes": 2500, "gpus_per_node": 8, "gpu_type": "A100", "levels": ["pair", "socket"],
               "racks": 100, "cpus_per_node": 128, "memory_mb_per_node": 1048576,
               "vcs": {f"vc{i:02d}": racks * 200 for i, racks in enumerate([20, 20, 10, 10, 10, 10, 5, 5, 5, 5])}},
}

BUILTIN_MODELS = tuple(_SHORT)


def builtin_model(name: str) -> dict[str, Any]:
    """The HiveD-form dict of a built-in model."""
    return expand_short_form(copy.deepcopy(_SHORT[name]))
