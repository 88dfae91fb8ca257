import json
import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture
def recorded():
    """Recorded JSON shaped per docs/rest-api.md (cluster, vcs, jobs)."""
    return {name: json.loads((DATA / f"{name}.json").read_text()) for name in ("cluster", "vcs", "jobs")}
