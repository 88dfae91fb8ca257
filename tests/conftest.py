"""Root conftest: loads every fixture module in tests/fixtures/ as a pytest plugin.

Each area keeps its shared fixtures in its own module there (live_server.py, docker_engine.py,
slurm_cluster.py, browser.py, ...), so nobody edits one big conftest.
"""

import os
import pathlib
import sys

from hypothesis import settings

# Property tests run the same examples on every run (a CI verdict never hangs on a lucky draw); look for
# new counterexamples with HYPOTHESIS_PROFILE=explore (a fresh random draw each run).
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_here = pathlib.Path(__file__).parent
sys.path.insert(0, str(_here))

pytest_plugins = ["pytest_jupyter.jupyter_server"] + sorted(
    f"fixtures.{p.stem}" for p in (_here / "fixtures").glob("*.py") if p.stem != "__init__"
)
