"""GPU inventory, monitoring and hardware health for hive-lab.

- ``nvml_backend``: choose the real ``pynvml`` or ``fake_nvml`` (a fake machine from a description);
- ``inventory``: GPUs and topology -> the node's cell tree (HiveD config), compare with an admin config;
- ``sampler``: per-GPU readings, XID events, processes -> jobs;
- ``health``: rules turning readings into HealthEvents (bad GPUs);
- ``metrics``: Prometheus collector for all of it;
- ``capture``: record what a real NVML answers, as a fixture the fake backend replays.

The pynvml calls used, all of them: nvmlInit, nvmlShutdown, nvmlSystemGetDriverVersion,
nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetUUID, nvmlDeviceGetName,
nvmlDeviceGetMemoryInfo, nvmlDeviceGetPciInfo, nvmlDeviceGetTopologyCommonAncestor,
nvmlDeviceGetNumaNodeId, nvmlDeviceGetCpuAffinity, nvmlDeviceGetNvLinkState,
nvmlDeviceGetNvLinkRemotePciInfo, nvmlDeviceGetUtilizationRates, nvmlDeviceGetTemperature,
nvmlDeviceGetPowerUsage, nvmlDeviceGetTotalEccErrors, nvmlDeviceGetRetiredPages,
nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRemappedRows, nvmlDeviceGetComputeRunningProcesses,
nvmlDeviceGetIndex, nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait, nvmlEventSetFree.
"""
