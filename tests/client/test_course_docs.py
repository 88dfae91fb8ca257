"""Every ``hive-lab`` command docs/jupyterhub.md and the README's course lines show is one the CLI takes
(parsed by the real parser: a renamed option or subcommand fails here), and the set-up command the
docs give writes a course that ``course check`` passes."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from hive_lab.cli import build_parser, main

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = [REPO / "docs" / "jupyterhub.md", REPO / "README.md", REPO / "docs" / "teaching.md"]


def documented_commands() -> list[str]:
    out = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
            text = block.replace("\\\n", " ")
            for line in text.splitlines():
                line = line.split("  #")[0].strip()
                m = re.match(r"^(?:sudo )?(?:/opt/hive/bin/)?hive-lab (.*)$", line)
                if m:
                    out.append(m.group(1).split(" > ")[0])
    return out


COMMANDS = documented_commands()


def test_the_docs_show_the_course_commands():
    assert any(c.startswith("course init") for c in COMMANDS) and any(c.startswith("course check") for c in COMMANDS)
    assert len(COMMANDS) >= 10, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_each_documented_command_parses(command):
    build_parser().parse_args(shlex.split(command))  # SystemExit(2) on an unknown option or subcommand


def test_the_documented_course_init_writes_a_course_that_checks(tmp_path, capsys):
    init = next(c for c in COMMANDS if c.startswith("course init"))
    assert main([*shlex.split(init), "--root", str(tmp_path)]) == 0, capsys.readouterr().err
    assert main(["course", "check", "--root", str(tmp_path)]) == 0
