"""docs/rest-api.md's endpoint tables are generated from the route table (api/rest_docs.py) and cannot
drift from what the server registers and documents."""

import pathlib

import pytest

from hive_lab_server.api.handlers import TABLE
from hive_lab_server.api.rest_docs import render

DOC = pathlib.Path(__file__).parents[3] / "docs" / "rest-api.md"


def test_the_tables_in_the_docs_are_the_route_tables():
    text = DOC.read_text(encoding="utf-8")
    assert render(text, TABLE) == text, (
        "docs/rest-api.md's endpoint tables differ from the routes: run "
        "python -m hive_lab_server.api.rest_docs docs/rest-api.md")
    rows = [line for line in text.splitlines() if line.startswith(("| GET ", "| POST ", "| PUT ", "| PATCH ",
                                                                    "| DELETE "))]
    assert len(rows) == sum(len(route.operations) for route in TABLE)
    assert "| POST | `jobs/{job_id}/resize` | admins | Give an elastic job another GPU count" in text


def test_an_edited_table_or_a_route_without_one_is_caught():
    text = DOC.read_text(encoding="utf-8")
    edited = text.replace("| DELETE | `jobs/{job_id}` | owner or admin |", "| DELETE | `jobs/{job_id}` | anyone |")
    assert edited != text and render(edited, TABLE) == text  # a hand edit is drift: generating undoes it
    without_admin = text.replace("<!-- endpoints:admin -->", "").replace("<!-- /endpoints:admin -->", "")
    with pytest.raises(ValueError, match="no table for the routes of admin"):
        render(without_admin, TABLE)
    unknown_area = text + "\n<!-- endpoints:nowhere -->\n<!-- /endpoints:nowhere -->\n"
    with pytest.raises(ValueError, match="'nowhere', which no route has"):
        render(unknown_area, TABLE)
