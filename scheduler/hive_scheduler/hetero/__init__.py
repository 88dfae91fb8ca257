"""Heterogeneity-aware scheduling (Gavel, OSDI'20) and time-slicing (Gandiva, OSDI'18) for hive-lab.

- :mod:`.throughputs` Gavel's throughput matrix (job type x GPU type x scale factor -> steps/s)
- :mod:`.trace` Gavel's tab-separated job traces
- :mod:`.cluster` GPUs per type (short form ``v100:8,p100:16``, or a HiveD config) and per VC
- :mod:`.policies` Gavel's policies by Gavel's names (LPs solved by scipy's HiGHS)
- :mod:`.rounds` the round mechanism that realises an allocation
- :mod:`.simulate` the round-based simulator and :mod:`.metrics` its figures

Pure Python (scipy's HiGHS module for the LP policies, loaded without numpy): no Jupyter, tornado or docker imports.
"""

from .cluster import ClusterSpecError, GpuCluster, load_gpu_cluster, parse_short_form
from .metrics import HeteroMetrics
from .policies import POLICIES, make_policy
from .simulate import SimulationError, simulate
from .throughputs import ThroughputError, Throughputs, load_throughputs
from .trace import TraceError, TraceJob, load_trace

__all__ = [
    "POLICIES", "ClusterSpecError", "GpuCluster", "HeteroMetrics", "SimulationError", "ThroughputError",
    "Throughputs", "TraceError", "TraceJob", "load_gpu_cluster", "load_throughputs", "load_trace",
    "make_policy", "parse_short_form", "simulate",
]
