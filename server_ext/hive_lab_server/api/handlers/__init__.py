"""The REST routes of hive-lab (paths relative to ``<base_url>``): one table (``TABLE``, shaped by
``api/routes.py``) from which the extension registers its handlers (``ROUTES``), ``openapi.py`` builds the
document's paths and ``rest_docs`` writes docs/rest-api.md's endpoint tables."""

from hive_lab_server.wire import models
from hive_lab_server.api.routes import PREFIX, Answer, Operation, Param, Route, in_query, tornado_rules
from hive_lab_server.api.stated_rules import ARRAY_RULES, JOB_RULES, PAGE_RULES, SCHEDULE_RULES
from hive_lab_server.wire.job_state import STATE_NAMES
from hive_lab_server.wire.schedule_models import ScheduleList, ScheduleOut
from hive_lab_server.api.handlers.cluster import ClusterHandler, DrainHandler, MeHandler, VcLimitsHandler, VcsHandler
from hive_lab_server.api.handlers.job_actions import BODIES as ACTION_BODIES, JobActionHandler
from hive_lab_server.api.handlers.jobs import JobHandler, JobLogsHandler, JobOutputFileHandler, JobOutputsHandler, JobsHandler
from hive_lab_server.api.handlers.live import EventsHandler, MetricsHandler, SpecHandler
from hive_lab_server.api.handlers.arrays import ArrayActionHandler, ArrayCancel, ArrayHandler, ArrayPatch, ArraysHandler
from hive_lab_server.api.handlers.base import NotFoundHandler
from hive_lab_server.api.handlers.usage import UsageHandler
from hive_lab_server.api.handlers.history import HistoryHandler
from hive_lab_server.api.handlers.schedules import ScheduleActionHandler, ScheduleHandler, SchedulesHandler
from hive_lab_server.api.handlers.query import (AFTER_HELP, AFTER_SCHEMA, FLAG_SCHEMA, MAX_QUERY_INT, NAMES_SCHEMA,
                                                OFFSET_HELP, SINCE_PATTERN, TEXT_SCHEMA, integer_schema)
from hive_lab_server.api.handlers.upgrade import MAX_EVENT_SEQ, UPGRADE_HEADERS


def text(name: str, regex: str, example: str) -> Param:
    """A path parameter the document states with the same pattern tornado matches."""
    return Param(name, regex, {"type": "string", "pattern": f"^{regex}$"}, example)


JOB_ID = text("job_id", "[A-Za-z0-9_.-]{1,64}", "j-000001")
ARRAY_ID = text("array_id", "a-[0-9]{1,12}", "a-000001")
SCHEDULE_ID = text("schedule_id", "[A-Za-z0-9_.-]{1,64}", "s-000001")
NODE = text("node", "[^/]{1,256}", "node-0")
VC = text("vc", "[^/]{1,128}", "default")
GPU = Param("index", "[^/]+", {"type": "integer", "minimum": 0}, "0", kwarg="gpu")
OUTPUT_PATH = Param("path", ".+", {"type": "string"}, "model.pt")


def action(*names: str) -> Param:
    """The last part of a URL naming what to do: each operation documents one of ``names``."""
    return Param("action", "|".join(names))


OFFSET = integer_schema(0, MAX_QUERY_INT, 0)
PAGE = (in_query("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}),
        in_query("offset", {**OFFSET, "maximum": 10**9}, OFFSET_HELP), in_query("after", AFTER_SCHEMA, AFTER_HELP))
SINCE = in_query("since", {"type": "string", "default": "7d", "pattern": SINCE_PATTERN},
                 "start of the window: 7d, 24h, 90m before now, or an ISO date/time (UTC), e.g. 2026-11-01")
STATES = "|".join(STATE_NAMES)
FOREIGN = {".*": "the file is read by its platform's rules (docs/formats.md): OpenPAI v2, Kubernetes, Volcano, "
                 "sbatch; a 400 names the file's own field"}
OWNER = "owner or admin"
OWNER_404 = "owner or admin; others get 404"
ADMINS = "admins"
ANYONE = "anyone"

JOB = Answer(200, "the job", models.Job)
ACTED = Answer(200, "the job (paused / queued again / being stopped with a checkpoint)", models.Job)
ARRAY = Answer(200, "the array with its counts by state", models.Array)
SCHEDULE = Answer(200, "the schedule with its next run and its last runs", ScheduleOut)
DRAIN = Answer(200, "the new drain state", models.Drain)
HEALTHY = Answer(200, "the GPUs marked healthy", models.Healthy)

EVENTS_DESCRIPTION = """A websocket of JSON messages (`x-messages`), each with `seq`. `state` messages are the
stored state changes, numbered by a sequence that only grows, also across server restarts. A client remembers
the last `seq` it read and reconnects with `since=<seq>`: after `hello` the server replays the state changes
after it (at most HiveLabApp.events_replay_max), then goes on live; when it cannot (more than that, or a `seq`
its store does not know) it sends `snapshot`: refetch, then go on from the snapshot's `seq`. `job`, `cluster`
and `vcs` messages are live only. A subscriber more than HiveLabApp.events_buffer_bytes behind is closed with
code 4008 (reason: slow consumer) and may resume with `since`."""

TABLE: list[Route] = [
    Route("/jobs", JobsHandler, area="jobs", operations=(
        Operation("get", "listJobs", "Jobs, newest first, filtered, a page at a time (after=<next>: stable while "
                  "jobs arrive)", ANYONE + " (other users' jobs without their private parts)",
                  Answer(200, "a page of jobs", models.JobList), (400, 403), (
                      in_query("user", NAMES_SCHEMA, "comma-separated user names; `me` is the caller"),
                      in_query("vc", NAMES_SCHEMA, "comma-separated VC names"),
                      in_query("state", {"type": "string", "pattern": f"^({STATES})(,({STATES}))*$"},
                            f"comma-separated states ({', '.join(STATE_NAMES)})"),
                      *PAGE,
                      in_query("elements", {**FLAG_SCHEMA, "default": "true"},
                            "false: leave out the elements of job arrays (see GET arrays)")),
                  extra={"x-rules": dict(PAGE_RULES)}),
        Operation("post", "submitJob", "Submit a job: hive-lab's JobSpec (JSON/YAML), an OpenPAI job (protocol v1 "
                  "JSON, v2 YAML), a Kubernetes batch/v1 Job or v1 Pod, or a Volcano Job (YAML/JSON), or an sbatch "
                  "script (text/plain), each taken as it is (docs/formats.md); with dry_run=true only say what would "
                  "happen; a JobSpec with array or sweep makes a job array (201 with the Array, as POST arrays)",
                  "anyone who may use the VC, within their limits",
                  Answer(201, "the job, queued or scheduled", models.Job), (400, 403, 413, 429), (
                      in_query("dry_run", FLAG_SCHEMA,
                            "true: store nothing, launch nothing; answer what would happen now (200, WhatIf)"),
                      in_query("no_image", FLAG_SCHEMA,
                            "true (--no-image), on a server whose launcher has no containers: the images a job file "
                            "names are not applied (listed in spec.source.not_applied); its commands run as "
                            "processes. 400 on a server that runs images")),
                  body={"oneOf": [{"$ref": "#/components/schemas/JobSpec"}, {"$ref": "#/components/schemas/PaiJob"}]},
                  body_content={
                      "application/yaml": {"schema": {"type": "object", "description": "JobSpec, an OpenPAI v2 job, "
                                                      "a Kubernetes Job/Pod or a Volcano Job"}, "x-rules": FOREIGN},
                      "text/plain": {"schema": {"type": "string", "description": "an sbatch script (#SBATCH lines)"},
                                     "x-rules": FOREIGN}},
                  also=(Answer(200, "dry_run=true: what would happen now (nothing was stored)", models.WhatIf),),
                  rules=JOB_RULES),
    )),
    Route("/jobs/{job_id}", JobHandler, params=(JOB_ID,), area="jobs", operations=(
        Operation("get", "getJob", "One job with its history (spec and dirs only for its owner and admins)",
                  ANYONE, JOB, (403, 404)),
        Operation("delete", "cancelJob", "Cancel a job", OWNER,
                  Answer(200, "the job (state cancelled once stopped)", models.Job), (403, 404, 409),
                  (in_query("reason", TEXT_SCHEMA, "why (kept in the job's reason, 300 characters)"),)),
    )),
    Route("/jobs/{job_id}/{action}", JobActionHandler, params=(JOB_ID, action("pause", "resume", "migrate", "resize")),
          area="jobs", operations=(
        Operation("post", "pauseJob", "Pause a job: checkpoint signal, stop, out of the queue until resumed",
                  OWNER, ACTED, (400, 403, 404, 409), body=ACTION_BODIES["pause"].model_json_schema(),
                  body_required=False, path="/jobs/{job_id}/pause"),
        Operation("post", "resumeJob", "Queue a paused job again; it finds HIVE_RESUMED=1", OWNER,
                  ACTED, (400, 403, 404, 409), body=ACTION_BODIES["resume"].model_json_schema(), body_required=False,
                  path="/jobs/{job_id}/resume"),
        Operation("post", "migrateJob", "Move a job to another GPU type, through a checkpoint", ADMINS,
                  ACTED, (400, 403, 404, 409), body=ACTION_BODIES["migrate"].model_json_schema(),
                  path="/jobs/{job_id}/migrate"),
        Operation("post", "resizeJob", "Give an elastic job another GPU count in min_gpus..max_gpus", ADMINS,
                  ACTED, (400, 403, 404, 409), body=ACTION_BODIES["resize"].model_json_schema(),
                  path="/jobs/{job_id}/resize"),
    )),
    Route("/jobs/{job_id}/logs", JobLogsHandler, params=(JOB_ID,), area="jobs", operations=(
        Operation("get", "getJobLogs", "A task's log; `follow=1` streams text/plain until the task "
                  "ends", OWNER, Answer(200, "a chunk of the log", {"application/json": {"schema": {
                      "$ref": "#/components/schemas/LogChunk"}}, "text/plain": {"schema": {"type": "string"}}}),
                  (400, 403, 404), (in_query("task", TEXT_SCHEMA, "task name, e.g. main-0 (default: the first task)"),
                                    in_query("offset", OFFSET), in_query("follow", FLAG_SCHEMA))),
    )),
    Route("/jobs/{job_id}/outputs", JobOutputsHandler, params=(JOB_ID,), area="jobs", operations=(
        Operation("get", "listJobOutputs", "Files in the job's output dir", OWNER,
                  Answer(200, "the files", models.OutputList), (403, 404)),
    )),
    Route("/jobs/{job_id}/outputs/{path}", JobOutputFileHandler, params=(JOB_ID, OUTPUT_PATH), area="jobs",
          slash=False, operations=(
        Operation("get", "getJobOutput", "One output file", OWNER,
                  Answer(200, "the file", {"application/octet-stream": {"schema": {"type": "string",
                                                                                   "format": "binary"}}}),
                  (400, 403, 404)),
    )),
    Route("/arrays", ArraysHandler, area="arrays", operations=(
        Operation("get", "listArrays", "The caller's arrays with counts by state, newest first (admins: user=NAME "
                  "or user=*)", "anyone: their own; admins: anyone's", Answer(200, "a page of arrays", models.ArrayList),
                  (400, 403), (in_query("user", NAMES_SCHEMA, "me (default), a user name or * (admins)"), *PAGE),
                  extra={"x-rules": dict(PAGE_RULES)}),
        Operation("post", "submitArray", "Submit a job array or sweep: a JobSpec plus array (e.g. \"0-49%8\": indices "
                  "0..49, at most 8 at once; \"1,3,5-9%2\") and/or sweep ({\"lr\": [0.1, 0.01]}: the product of the "
                  "lists; with a sweep array gives only the throttle, \"%8\"); at most 10000 elements. POST jobs takes "
                  "the same body", "anyone who may use the VC, within their limits",
                  Answer(201, "the array", models.Array), (400, 403, 413),
                  body={"$ref": "#/components/schemas/ArraySpec"}, rules=ARRAY_RULES),
    )),
    Route("/arrays/{array_id}", ArrayHandler, params=(ARRAY_ID,), area="arrays", operations=(
        Operation("get", "getArray", "An array with its counts by state and a page of its elements by index",
                  OWNER, ARRAY, (400, 403, 404), (
                      in_query("limit", {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}),
                      in_query("offset", {**OFFSET, "maximum": 10**9}))),
        Operation("delete", "cancelArray", "Cancel every element not ended", OWNER, ARRAY, (403, 404)),
        Operation("patch", "patchArray", "Change the throttle; elements running stay", OWNER, ARRAY,
                  (400, 403, 404), body=ArrayPatch.model_json_schema()),
    )),
    Route("/arrays/{array_id}/{action}", ArrayActionHandler, params=(ARRAY_ID, action("cancel", "pause", "resume")),
          area="arrays", operations=(
        Operation("post", "cancelArrayElements", "Cancel some elements (indices) or all not ended",
                  OWNER, ARRAY, (400, 403, 404), body=ArrayCancel.model_json_schema(), path="/arrays/{array_id}/cancel"),
        Operation("post", "pauseArray", "Release no more elements and pause those not ended", OWNER,
                  ARRAY, (403, 404), path="/arrays/{array_id}/pause"),
        Operation("post", "resumeArray", "Resume the paused elements and go on releasing", OWNER,
                  ARRAY, (403, 404), path="/arrays/{array_id}/resume"),
    )),
    Route("/cluster", ClusterHandler, area="cluster", operations=(
        Operation("get", "getCluster", "The cell tree with each cell's state, and a flat list of GPUs", ANYONE,
                  Answer(200, "the cluster", models.Cluster), (403,)),
    )),
    Route("/vcs", VcsHandler, area="cluster", operations=(
        Operation("get", "listVcs", "Virtual clusters with guarantee, use, borrowing and queue length", ANYONE,
                  Answer(200, "the VCs", models.VcList), (403,)),
    )),
    Route("/vcs/{vc}/limits", VcLimitsHandler, params=(VC,), area="cluster", operations=(
        Operation("get", "getVcLimits", "The VC's per-user limits",
                  "anyone who may use the VC", Answer(200, "the limits", models.VcLimits), (403, 404)),
        Operation("put", "putVcLimits", "Replace the VC's per-user limits; stored, applied at once", ADMINS,
                  Answer(200, "the limits now in effect", models.VcLimits), (400, 403, 404), body=models.VcLimitsBody),
    )),
    Route("/me", MeHandler, area="cluster", operations=(
        Operation("get", "getMe", "The caller, whether they are an admin, the VCs they may submit to and their limits "
                  "there", ANYONE, Answer(200, "the caller", models.Me), (403,)),
    )),
    Route("/usage", UsageHandler, area="usage", operations=(
        Operation("get", "getUsage", "GPU-seconds, CPU-seconds and jobs per user, VC, day or job (non-admins: their "
                  "own only)", "anyone: their own rows; admins: everyone's",
                  Answer(200, "the totals", models.UsageReport), (400, 403, 404), (
                      SINCE, in_query("by", {"type": "string", "enum": ["user", "vc", "day", "job"], "default": "user"}),
                      in_query("user", NAMES_SCHEMA, "comma-separated user names (admins; others may name only "
                                                  "themselves); `me` is the caller"),
                      in_query("vc", NAMES_SCHEMA, "comma-separated VC names: only usage in these VCs (a course's)"))),
    )),
    Route("/history", HistoryHandler, area="history", operations=(
        Operation("get", "getHistory", "The jobs of a window as a history trace the simulator replays, with the live "
                  "cluster and policy", ADMINS, Answer(200, "the history", models.HistoryReport), (400, 403), (
                      SINCE, in_query("real_names", {**FLAG_SCHEMA, "default": "false"},
                                   "owners' names instead of pseudonyms (user-001, ... in order of first submit)"))),
    )),
    Route("/nodes/{node}/(?:gpus/{index}/)?{action}", DrainHandler,
          params=(NODE, GPU, action("drain", "undrain", "healthy")), area="admin", operations=(
        Operation("post", "drainNode", "No new work on this node", ADMINS, DRAIN, (403, 404),
                  path="/nodes/{node}/drain"),
        Operation("post", "undrainNode", "Undo a node drain", ADMINS, DRAIN, (403, 404),
                  path="/nodes/{node}/undrain"),
        Operation("post", "drainGpu", "No new work on this GPU", ADMINS, DRAIN, (400, 403, 404),
                  path="/nodes/{node}/gpus/{index}/drain"),
        Operation("post", "undrainGpu", "Undo a GPU drain", ADMINS, DRAIN, (400, 403, 404),
                  path="/nodes/{node}/gpus/{index}/undrain"),
        Operation("post", "markNodeHealthy", "The node's bad GPUs were reset or repaired; give them out again",
                  ADMINS, HEALTHY, (403, 404), path="/nodes/{node}/healthy"),
        Operation("post", "markGpuHealthy", "A bad GPU was reset or repaired; give it out again unless drained",
                  ADMINS, HEALTHY, (400, 403, 404), path="/nodes/{node}/gpus/{index}/healthy"),
    )),
    Route("/events", EventsHandler, area="live", operations=(
        Operation("get", "events", "Websocket of live updates: hello, state, snapshot, job, cluster, vcs messages",
                  ANYONE + " (each sees what GET jobs shows them)",
                  Answer(101, "switching to the websocket protocol"), (400, 403), (
                      in_query("since", integer_schema(0, MAX_EVENT_SEQ),
                            "replay the stored state changes after this seq (the last one you read), then go live"),
                      *({"name": name, "in": "header", "required": True, "schema": schema}
                        for name, schema in UPGRADE_HEADERS.items())),
                  extra={"description": EVENTS_DESCRIPTION, "x-messages": {"oneOf": [
                      {"$ref": f"#/components/schemas/{m.__name__}"} for m in models.EVENT_MODELS]}}),
    )),
    Route("/metrics", MetricsHandler, area="live", operations=(
        Operation("get", "getMetrics", "Prometheus text format (per-user series hive_lab_user_* for admins only; "
                  "others get the rest)", ANYONE + " (per-user series: admins)",
                  Answer(200, "metrics", {"text/plain": {"schema": {"type": "string"}}}), (403,)),
    )),
    Route("/spec.yaml", SpecHandler, area="live", slash=False, operations=(
        Operation("get", "getSpec", "This document", ANYONE,
                  Answer(200, "the OpenAPI document", {"application/yaml": {"schema": {"type": "object"}}}), (403,)),
    )),
    Route("/schedules", SchedulesHandler, area="schedules", operations=(
        Operation("get", "listSchedules", "Recurring jobs with their next run time and last runs (yours; admins: "
                  "everyone's, or user=...)", "anyone: their own; admins: everyone's (user= filters)",
                  Answer(200, "the schedules", ScheduleList), (400, 403),
                  (in_query("user", NAMES_SCHEMA, "comma-separated user names (admins); `me` is the caller"),)),
        Operation("post", "createSchedule", "A job submitted as you at each time a cron expression names in a time "
                  "zone (docs/schedules.md); a schedule of yours with the same name is replaced (200, replaced: "
                  "true)", "anyone, for themselves (the checks of a POST jobs apply)",
                  Answer(201, "the schedule", ScheduleOut), (400, 403),
                  body={"$ref": "#/components/schemas/ScheduleBody"},
                  also=(Answer(200, "your schedule of that name, replaced by this one (replaced: true; same id, its "
                                    "runs kept)", ScheduleOut),),
                  rules=SCHEDULE_RULES),
    )),
    Route("/schedules/{schedule_id}", ScheduleHandler, params=(SCHEDULE_ID,), area="schedules", operations=(
        Operation("get", "getSchedule", "One schedule", OWNER_404, SCHEDULE, (404,)),
        Operation("delete", "deleteSchedule", "Delete a schedule; its jobs are not touched",
                  OWNER_404, Answer(204, "deleted"), (404,)),
    )),
    Route("/schedules/{schedule_id}/{action}", ScheduleActionHandler,
          params=(SCHEDULE_ID, action("pause", "resume")), area="schedules", operations=(
        Operation("post", "pauseSchedule", "No runs until resumed", OWNER_404,
                  SCHEDULE, (404,), path="/schedules/{schedule_id}/pause"),
        Operation("post", "resumeSchedule", "Runs again from the next due time after now; missed times are not run", OWNER_404, SCHEDULE, (404,),
                  path="/schedules/{schedule_id}/resume"),
    )),
]

# what no route serves: a JSON 404 naming the path (not tornado's HTML page)
ROUTES = tornado_rules(TABLE, (rf"{PREFIX}/(?P<path>.*)", NotFoundHandler))
