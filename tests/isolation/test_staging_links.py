"""Staging a job's ``files`` as root never follows a link the job planted in its own dir (a retry stages
into a dir the previous attempt could change): ``staging.write_beneath``."""

from __future__ import annotations

import os
import stat

import pytest

from hive_lab_server.execution.isolation.safe_files import UnsafePath
from hive_lab_server.execution.staging import write_beneath


def test_files_are_written_0600_with_their_dirs(tmp_path):
    root = tmp_path / "job"
    root.mkdir()
    write_beneath(root, "conf/sub/settings.json", '{"a": 1}')
    target = root / "conf" / "sub" / "settings.json"
    assert target.read_text() == '{"a": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "conf").stat().st_mode) == 0o700


@pytest.mark.parametrize("planted", ["dir", "file"])
def test_a_planted_link_is_never_followed(tmp_path, planted):
    root, outside = tmp_path / "job", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    if planted == "dir":  # the job swapped its conf/ dir for a link to a dir it may not write
        os.symlink(outside, root / "conf")
        with pytest.raises(UnsafePath):
            write_beneath(root, "conf/settings.json", "staged")
    else:  # a link where the file goes is replaced, not written through
        (root / "conf").mkdir()
        os.symlink(outside / "victim", root / "conf" / "settings.json")
        write_beneath(root, "conf/settings.json", "staged")
        assert not os.path.islink(root / "conf" / "settings.json")
    assert list(outside.iterdir()) == []
    with pytest.raises(UnsafePath):
        write_beneath(root, "../outside/x", "staged")
