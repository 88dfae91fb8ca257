"""Captured NVML answers replay through the fake backend and give the same discovery and samples."""

import dataclasses
import json
import pathlib

import pytest

from fixtures.fake_nvml import TOPOLOGIES, topology
from hive_lab_server.hardware.capture import capture_with_results
from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.hardware.inventory import build_cluster_config, detect_local_inventory
from hive_lab_server.hardware.nvml_backend import nvml_session
from hive_lab_server.hardware.sampler import GpuSampler

REAL = sorted((pathlib.Path(__file__).parents[1] / "fixtures" / "nvml_real").glob("*.json"))

# readings that legitimately differ between two sampling rounds
_VOLATILE = {"at"}


def check_replay(captured: dict) -> None:
    replay = FakeNvml(json.loads(json.dumps(captured)))
    inv = detect_local_inventory(replay)
    expected = captured["expected"]
    assert build_cluster_config(inv) == expected["config"]
    assert {str(g.index): g.gpu_type for g in inv.gpus} == expected["gpu_types"]
    assert {str(g.index): list(g.nvlink_peers) for g in inv.gpus} == expected["nvlink_peers"]
    sampler = GpuSampler(replay, captured["hostname"])
    samples = [dataclasses.asdict(s) for s in sampler.sample()]
    sampler.close()
    strip = lambda rows: [{k: v for k, v in r.items() if k not in _VOLATILE} for r in rows]  # noqa: E731
    assert strip(samples) == strip(captured["samples"])


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_capture_of_fake_machine_round_trips(name, tmp_path):
    desc = topology(name)
    if name == "dgx1":  # an older GPU: page retirement instead of row remapping, some retired pages
        for g in desc["gpus"]:
            g["row_remapping"] = False
        desc["gpus"][3]["retired_pages"] = {"sbe": 2, "dbe": 1}
    with nvml_session(FakeNvml(desc)) as ok:
        assert ok
    nvml = FakeNvml(desc)
    with nvml_session(nvml):
        captured = capture_with_results(nvml)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(captured))
    loaded = json.loads(path.read_text())
    assert loaded["format"] == "hive-lab-nvml-capture/1"
    check_replay(loaded)
    # and discovery from the replay equals discovery from the original description
    assert build_cluster_config(detect_local_inventory(FakeNvml(loaded))) == build_cluster_config(
        detect_local_inventory(FakeNvml(desc)))


def test_unsupported_answers_replay_as_errors():
    desc = topology("single")  # consumer card: no ECC
    nvml = FakeNvml(desc)
    with nvml_session(nvml):
        captured = capture_with_results(nvml)
    assert "ecc_uncorrected" in captured["unsupported"]["gpus[0]"]
    check_replay(captured)


@pytest.mark.skipif(not REAL, reason="no real NVML capture in tests/fixtures/nvml_real yet (see its README)")
@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_capture_replays(path):
    check_replay(json.loads(path.read_text()))
