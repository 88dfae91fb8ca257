"""Discovery through the fake NVML: topologies -> the expected cell trees; comparing with admin configs."""

import copy

import pytest

from fixtures.fake_nvml import TOPOLOGIES, topology
from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.hardware.inventory import (
    build_cluster_config,
    compare_with_config,
    detect_local_cluster,
    detect_local_inventory,
    gpu_type_name,
)


def shape(config):
    """cell types as (child, number) and each physical cell's GPU nesting, e.g. [[0, 1], [2, 3]]."""

    def nest(cells):
        return [nest(c["cellChildren"]) if "cellChildren" in c else c["cellAddress"] for c in cells]

    pc = config["physicalCluster"]
    types = {k: (v["childCellType"], v["childCellNumber"], v.get("isNodeLevel", False)) for k, v in pc["cellTypes"].items()}
    cells = [(c["cellType"], c["cellAddress"], nest(c["cellChildren"])) for c in pc["physicalCells"]]
    return types, cells


EXPECTED = {
    "dgx1": (
        {"V100-SWITCH": ("V100", 2, False), "V100-SOCKET": ("V100-SWITCH", 2, False), "V100-NODE": ("V100-SOCKET", 2, True)},
        [("V100-NODE", "dgx1", [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])],
    ),
    "hgx-h100": (
        {"H100-SWITCH": ("H100", 2, False), "H100-SOCKET": ("H100-SWITCH", 2, False), "H100-NODE": ("H100-SOCKET", 2, True)},
        [("H100-NODE", "hgx", [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])],
    ),
    "workstation-4": (
        {"A6000-PAIR": ("A6000", 2, False), "A6000-NODE": ("A6000-PAIR", 2, True)},
        [("A6000-NODE", "ws", [[0, 1], [2, 3]])],
    ),
    "odd-3": ({"A100-NODE": ("A100", 3, True)}, [("A100-NODE", "odd", [0, 1, 2])]),
    "uneven-sockets": ({"T4-NODE": ("T4", 8, True)}, [("T4-NODE", "uneven", list(range(8)))]),
    "mixed": (
        {"A100-NODE": ("A100", 2, True), "V100-NODE": ("V100", 2, True)},
        [("A100-NODE", "mixed", [0, 2]), ("V100-NODE", "mixed", [1, 3])],
    ),
    "single": ({"RTX4090-NODE": ("RTX4090", 1, True)}, [("RTX4090-NODE", "laptop", [0])]),
    "a100-40-80": (
        {"A100-40GB-NODE": ("A100-40GB", 2, True), "A100-80GB-NODE": ("A100-80GB", 2, True)},
        [("A100-40GB-NODE", "a100mix", [0, 1]), ("A100-80GB-NODE", "a100mix", [2, 3])],
    ),
    "two-level-switches": (
        {"L40S-SWITCH": ("L40S", 2, False), "L40S-SOCKET": ("L40S-SWITCH", 2, False), "L40S-NODE": ("L40S-SOCKET", 2, True)},
        [("L40S-NODE", "tls", [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_topology_gives_expected_cell_tree(name):
    config, uuids = detect_local_cluster(FakeNvml(topology(name)))
    assert shape(config) == EXPECTED[name]
    node_types = sorted(t for t, spec in config["physicalCluster"]["cellTypes"].items() if spec.get("isNodeLevel"))
    assert config["virtualClusters"] == {"default": {"virtualCells": [{"cellType": t, "cellNumber": 1} for t in node_types]}}
    gpus = topology(name)["gpus"]
    assert sorted(uuids) == [(topology(name)["hostname"], i) for i in range(len(gpus))]
    assert len(set(uuids.values())) == len(gpus)
    node = topology(name)["hostname"]
    assert config["nodeResources"] == {node: {"cpus": topology(name)["cpus"], "memoryMB": topology(name)["memory_mb"]}}


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_discovered_config_agrees_with_itself(name):
    inv = detect_local_inventory(FakeNvml(topology(name)))
    assert compare_with_config(inv, build_cluster_config(inv)) == []


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_core_accepts_discovered_config(name):
    core = pytest.importorskip("hive_scheduler")
    if not hasattr(core, "load_cluster_config"):
        pytest.skip("the core (hive_scheduler.load_cluster_config) has not landed yet")
    config, _ = detect_local_cluster(FakeNvml(topology(name)))
    model = core.load_cluster_config(config)
    node = topology(name)["hostname"]
    assert node in model.nodes
    assert model.nodes[node].gpu_count == len(topology(name)["gpus"])


def test_uuid_and_node_name_come_from_nvml():
    desc = topology("workstation-4")
    desc["gpus"][2]["uuid"] = "GPU-12345678-aaaa-bbbb-cccc-1234567890ab"
    config, uuids = detect_local_cluster(FakeNvml(desc), node="box-7")
    assert uuids[("box-7", 2)] == "GPU-12345678-aaaa-bbbb-cccc-1234567890ab"
    assert config["physicalCluster"]["physicalCells"][0]["cellAddress"] == "box-7"


def test_no_gpus_or_no_nvml_gives_none():
    assert detect_local_cluster(FakeNvml({"gpus": []})) is None
    assert detect_local_cluster("none") is None
    # the real pynvml on this machine: no driver -> None, not an exception
    real = detect_local_cluster("auto")
    assert real is None or isinstance(real[0], dict)


def test_lost_gpu_is_left_out_of_discovery():
    desc = topology("workstation-4")
    desc["faults"] = [{"at": 0, "gpu": 3, "lost": True}]
    inv = detect_local_inventory(FakeNvml(desc))
    assert [g.index for g in inv.gpus] == [0, 1, 2]
    assert any("GPU 3" in e and "lost" in e for e in inv.errors)


@pytest.mark.parametrize("model, expected", [
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 PCIe", "H100"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ("NVIDIA RTX A6000", "A6000"),
    ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"),
    ("NVIDIA GeForce GTX 1080 Ti", "GTX1080"),
    ("Quadro RTX 8000", "RTX8000"),
    ("NVIDIA GH200 480GB", "GH200"),
])
def test_gpu_type_names(model, expected):
    assert gpu_type_name(model) == expected


# ------------------------------------------------------------------ compare_with_config
@pytest.fixture
def dgx():
    inv = detect_local_inventory(FakeNvml(topology("dgx1")))
    return inv, build_cluster_config(inv)


def test_compare_reports_gpu_count(dgx):
    inv, config = dgx
    admin = copy.deepcopy(config)
    admin["physicalCluster"]["cellTypes"]["V100-NODE"]["childCellNumber"] = 3
    admin["physicalCluster"]["physicalCells"][0]["cellChildren"].append(
        {"cellAddress": 2, "cellChildren": [{"cellAddress": 8, "cellChildren": [{"cellAddress": 8}, {"cellAddress": 9}]},
                                            {"cellAddress": 9, "cellChildren": [{"cellAddress": 10}, {"cellAddress": 11}]}]})
    messages = compare_with_config(inv, admin)
    assert messages[0] == "node dgx1: NVML sees 8 GPUs (8x V100), the config declares 12 (12x V100)"
    assert "node dgx1: the config declares GPU 11 (V100), which NVML does not see" in messages


def test_compare_reports_types(dgx):
    inv, config = dgx
    admin = {
        "physicalCluster": {
            "cellTypes": {"DGX1-P100-NODE": {"childCellType": "DGX1-P100", "childCellNumber": 8, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "DGX1-P100-NODE", "cellAddress": "dgx1"}],
        },
        "virtualClusters": {},
    }
    messages = compare_with_config(inv, admin)
    assert messages[0] == "node dgx1 GPU 0: NVML sees Tesla V100-SXM2-16GB (type V100), the config declares type DGX1-P100"
    assert len(messages) == 8
    # a config type that names the family (HiveD style "DGX1-V100") matches
    admin_ok = copy.deepcopy(admin)
    admin_ok["physicalCluster"]["cellTypes"] = {"DGX1-V100-NODE": {"childCellType": "DGX1-V100", "childCellNumber": 8, "isNodeLevel": True}}
    admin_ok["physicalCluster"]["physicalCells"][0]["cellType"] = "DGX1-V100-NODE"
    assert compare_with_config(inv, admin_ok) == []


def test_compare_reports_topology(dgx):
    inv, config = dgx
    admin = copy.deepcopy(config)
    sockets = admin["physicalCluster"]["physicalCells"][0]["cellChildren"]
    sockets[0]["cellChildren"][1]["cellChildren"][0]["cellAddress"] = 5  # swap GPUs 2 and 5
    sockets[1]["cellChildren"][0]["cellChildren"][1]["cellAddress"] = 2
    messages = compare_with_config(inv, admin)
    assert ("node dgx1: the config puts GPUs 3, 5 in one V100-SWITCH cell, but NVML sees GPUs 3 and 5 connected "
            "only across CPU sockets, while GPU 3 reaches GPU 2 (outside that cell) through one PCIe switch") in messages
    assert any("in one V100-SOCKET cell" in m for m in messages)


def test_compare_reports_machine_not_in_config(dgx):
    inv, _ = dgx
    admin = {"physicalCluster": {"cellTypes": {"V100-NODE": {"childCellType": "V100", "childCellNumber": 8, "isNodeLevel": True}},
                                 "physicalCells": [{"cellType": "V100-NODE", "cellAddress": "n1"},
                                                   {"cellType": "V100-NODE", "cellAddress": "n2"}]}}
    assert compare_with_config(inv, admin) == [
        "this machine (dgx1) is not a node of the configured cluster (configured nodes: n1, n2); its 8 GPUs will not be scheduled"
    ]


def test_compare_nvlink_pairs():
    inv = detect_local_inventory(FakeNvml(topology("workstation-4")))
    admin = {"physicalCluster": {
        "cellTypes": {"A6000-PAIR": {"childCellType": "A6000", "childCellNumber": 2},
                      "A6000-NODE": {"childCellType": "A6000-PAIR", "childCellNumber": 2, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "A6000-NODE", "cellAddress": "ws", "cellChildren": [
            {"cellChildren": [{"cellAddress": 0}, {"cellAddress": 2}]},
            {"cellChildren": [{"cellAddress": 1}, {"cellAddress": 3}]}]}]}}
    messages = compare_with_config(inv, admin)
    assert messages[0] == ("node ws: the config puts GPUs 0, 2 in one A6000-PAIR cell, but NVML sees GPUs 0 and 2 "
                           "connected only through one PCIe host bridge, while GPU 0 reaches GPU 1 (outside that cell) by NVLink")
