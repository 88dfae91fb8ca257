"""Every setting is documented once, from the code: docs/configuration.md is what the traitlets say."""

import pathlib

from hive_lab_server.config_docs import markdown

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_configuration_page_is_generated_from_the_code():
    assert PAGE.read_text() == markdown(), (
        "docs/configuration.md is out of date: run `.venv/bin/python -m hive_lab_server.config_docs > docs/configuration.md`")


def test_every_setting_has_a_sentence():
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| `")]
    assert len(rows) > 80
    assert all(not line.rstrip().endswith("|  |") for line in rows), [r for r in rows if r.rstrip().endswith("|  |")]
