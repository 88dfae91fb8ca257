"""Scenario tests: event scripts in core_scenarios/*.jsonl (one call a line, with the decisions expected).

First line: {"cluster": NAME} (a config from core_helpers). Then per line: op, its arguments, ``t``,
``expect`` (compact decisions) and optionally ``reason`` (the queued reason of the step's job),
``placement`` (``[[node, [gpus]], ...]`` of the step's ``started`` decision for ``job``, or for
``placed`` when given) and ``doomed``
(``{vc: doomed_gpus}`` after the step).
"""

import json
import pathlib

import pytest

from core_helpers import HIVED_EXAMPLE, SMALL, WORKSTATION, run_script
from hive_scheduler import Scheduler

HERE = pathlib.Path(__file__).parent / "core_scenarios"
CLUSTERS = {"small": SMALL, "hived": HIVED_EXAMPLE, "workstation": WORKSTATION}
EXTRA = ("reason", "placement", "placed", "doomed")


@pytest.mark.parametrize("path", sorted(HERE.glob("*.jsonl")), ids=lambda p: p.stem)
def test_scenario(path):
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    s = Scheduler(CLUSTERS[lines[0]["cluster"]])
    steps = lines[1:]
    doomed_after = []
    script = [{k: v for k, v in st.items() if k not in EXTRA} for st in steps]
    for i, st in enumerate(steps):
        results = run_script(s, script[i:i + 1])
        res = results[0]
        if "reason" in st:
            queued = [d for d in res["decisions"] if d.event == "queued"]
            assert queued and queued[0].reason == st["reason"], (st, queued)
        if "placement" in st:
            started = [d for d in res["decisions"] if d.event == "started" and d.job == (st.get("placed") or st["job"])]
            assert started, (st, res["decisions"])
            got = [[p.node, list(p.gpus)] for p in started[0].placement]
            assert got == st["placement"], (st, got)
        if "doomed" in st:
            view = s.vc_view()
            doomed_after.append({vc: view[vc]["doomed_gpus"] for vc in st["doomed"]})
            assert doomed_after[-1] == st["doomed"], (st, doomed_after[-1])
