"""Scenario tests: event scripts in core_scenarios/*.jsonl (one call a line, with the decisions expected).

First line: {"cluster": NAME} (a config from core_helpers). Then per line: op, its arguments, ``t``,
``expect`` (compact decisions) and optionally ``reason`` (the queued reason of the step's job).
"""

import json
import pathlib

import pytest

from core_helpers import HIVED_EXAMPLE, SMALL, run_script
from hive_scheduler import Scheduler

HERE = pathlib.Path(__file__).parent / "core_scenarios"
CLUSTERS = {"small": SMALL, "hived": HIVED_EXAMPLE}


@pytest.mark.parametrize("path", sorted(HERE.glob("*.jsonl")), ids=lambda p: p.stem)
def test_scenario(path):
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    s = Scheduler(CLUSTERS[lines[0]["cluster"]])
    steps = lines[1:]
    results = run_script(s, [{k: v for k, v in st.items() if k != "reason"} for st in steps])
    for st, res in zip(steps, results):
        if "reason" in st:
            queued = [d for d in res["decisions"] if d.event == "queued"]
            assert queued and queued[0].reason == st["reason"], (st, queued)
