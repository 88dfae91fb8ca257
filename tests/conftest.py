"""Root conftest: loads every fixture module in tests/fixtures/ as a pytest plugin.

Each area keeps its shared fixtures in its own module there (live_server.py, docker_engine.py,
slurm_cluster.py, browser.py, ...), so nobody edits one big conftest.
"""

import pathlib
import sys

_here = pathlib.Path(__file__).parent
sys.path.insert(0, str(_here))

pytest_plugins = ["pytest_jupyter.jupyter_server"] + sorted(
    f"fixtures.{p.stem}" for p in (_here / "fixtures").glob("*.py") if p.stem != "__init__"
)
