"""``HiveLabApp.user_limits`` is checked whole at start: a malformed entry names the VC and key."""

import pytest

from hive_lab_server.jobs.limits import parse_config
from hive_scheduler.limits import LimitsError, UserLimits


def test_config_limits_parse_per_vc():
    tables = parse_config({"cv-101": {"default": {"max_gpus": 2}, "groups": {"ta": {"max_gpus": 4}}}}, ["cv-101", "x"])
    assert tables["cv-101"].resolve("ann", ["ta"]) == UserLimits(max_gpus=4)
    assert tables["cv-101"].resolve("bob") == UserLimits(max_gpus=2)
    assert "x" not in tables


@pytest.mark.parametrize("config, field, words", [
    ({"nope": {}}, "nope", "VC 'nope' does not exist"),
    ({"cv-101": {"default": {"max_gpus": -1}}}, "cv-101.default.max_gpus", "must be >= 0"),
    ({"cv-101": {"users": {"ann": {"gpus": 1}}}}, "cv-101.users.ann.gpus", "unknown limit 'gpus'"),
])
def test_malformed_config_names_the_vc_and_key(config, field, words):
    with pytest.raises(LimitsError) as e:
        parse_config(config, ["cv-101"])
    assert e.value.field == field and words in e.value.message and "user_limits" in e.value.message
