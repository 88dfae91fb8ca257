"""The request and response models of ``schedules`` (OpenAPI: openapi.py lists them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hive_lab_server.wire.models import IsoTime, _Out

Policy = Literal["skip", "queue_one", "run_all"]
POLICY_HELP = ("what happens when a run is due while the previous one is still going, or when runs were missed "
               "(the server was down): skip (run only when the previous run ended; missed runs are skipped), "
               "queue_one (missed runs become one run; a run due while the previous one goes waits for it to "
               "end, at most one waits), run_all (every due time runs, at once, side by side)")


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


# a nickname (any case, as cron.expression reads it) or five fields; each field's values are cronsim's rules
CRON_PATTERN = (r"^\s*(@(" + "|".join(_any_case(n) for n in ("yearly", "annually", "monthly", "weekly", "daily",
                                                               "midnight", "hourly"))
                + r")|[^\s@]+(\s+[^\s@]+){4})\s*$")


class ScheduleBody(BaseModel):
    """``POST schedules``: a job spec submitted at each time ``cron`` names in ``timezone``."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=128, description="unique per owner: a schedule of "
                                                                         "yours with this name is replaced; "
                                                                         "left out: the schedule's id")] | None = None
    # the pattern is stated in the document (json_schema_extra) but not checked by pydantic: the cron reader
    # refuses what it refuses with a sentence ("... is not a cron expression: ..."), not the regex
    cron: Annotated[str, Field(min_length=1, max_length=256, json_schema_extra={"pattern": CRON_PATTERN},
                               description="five fields (minute hour day month weekday) or @hourly, @daily, "
                                           "@weekly, @monthly, @yearly")]
    timezone: Annotated[str, Field(min_length=1, max_length=64, description="an IANA time zone, e.g. Europe/Berlin")] = "UTC"
    policy: Policy = Field("skip", description=POLICY_HELP)
    job: dict[str, Any] = Field(description="the job to submit each time (a JobSpec, without depends_on)",
                                json_schema_extra={"allOf": [{"$ref": "#/components/schemas/JobSpec"}]})
    paused: Annotated[bool, Field(strict=True)] = False


class ScheduleRunOut(_Out):
    due_at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    fired_at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    job_id: str | None = Field(None, description="the job this run submitted (null: none, see outcome)")
    outcome: Literal["submitted", "skipped", "refused", "lost"]
    reason: str = ""


class ScheduleOut(_Out):
    id: str
    name: str
    user: str
    cron: str
    timezone: str
    policy: Policy
    paused: bool
    job: dict[str, Any]
    created_at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    next_run_at: IsoTime | None = Field(None, description="null while paused", json_schema_extra={"format": "date-time"})
    next_run_local: str | None = Field(None, description="the next run in the schedule's own time zone, ISO 8601 "
                                                         "with its offset (null while paused)")
    when: str = Field("", description="the cron expression in words, e.g. 'every day at 00:00' (in timezone)")
    replaced: bool = Field(False, description="POST schedules only: true when this request replaced your schedule "
                                              "of the same name (names are unique per owner)")
    runs: list[ScheduleRunOut] = Field(description="the last runs, newest first")


class ScheduleList(_Out):
    schedules: list[ScheduleOut]


SCHEMA_MODELS: tuple[type[BaseModel], ...] = (ScheduleBody, ScheduleOut, ScheduleList)
