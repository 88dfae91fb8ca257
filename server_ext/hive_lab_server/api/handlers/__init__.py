"""The REST routes of hive-lab (paths relative to ``<base_url>``); see docs/rest-api.md and ``openapi.py``
(the OpenAPI document, generated from the pydantic models)."""

from hive_lab_server.api.handlers.cluster import ClusterHandler, DrainHandler, MeHandler, VcLimitsHandler, VcsHandler
from hive_lab_server.api.handlers.job_actions import JobActionHandler
from hive_lab_server.api.handlers.jobs import JobHandler, JobLogsHandler, JobOutputFileHandler, JobOutputsHandler, JobsHandler
from hive_lab_server.api.handlers.live import EventsHandler, MetricsHandler, SpecHandler
from hive_lab_server.api.handlers.arrays import ARRAY_ID, ArrayActionHandler, ArrayHandler, ArraysHandler
from hive_lab_server.api.handlers.base import NotFoundHandler
from hive_lab_server.api.handlers.usage import UsageHandler
from hive_lab_server.api.handlers.history import HistoryHandler
from hive_lab_server.api.handlers.schedules import ROUTES as SCHEDULE_ROUTES

PREFIX = r"/hive_lab/api"
JOB_ID = r"(?P<job_id>[A-Za-z0-9_.-]{1,64})"
NODE = r"(?P<node>[^/]{1,256})"
VC = r"(?P<vc>[^/]{1,128})"

ROUTES = [
    (rf"{PREFIX}/jobs/?", JobsHandler),
    (rf"{PREFIX}/jobs/{JOB_ID}/?", JobHandler),
    (rf"{PREFIX}/jobs/{JOB_ID}/(?P<action>pause|resume|migrate|resize)/?", JobActionHandler),
    (rf"{PREFIX}/jobs/{JOB_ID}/logs/?", JobLogsHandler),
    (rf"{PREFIX}/jobs/{JOB_ID}/outputs/?", JobOutputsHandler),
    (rf"{PREFIX}/jobs/{JOB_ID}/outputs/(?P<path>.+)", JobOutputFileHandler),
    (rf"{PREFIX}/arrays/?", ArraysHandler),
    (rf"{PREFIX}/arrays/{ARRAY_ID}/?", ArrayHandler),
    (rf"{PREFIX}/arrays/{ARRAY_ID}/(?P<action>cancel|pause|resume)/?", ArrayActionHandler),
    (rf"{PREFIX}/cluster/?", ClusterHandler),
    (rf"{PREFIX}/vcs/?", VcsHandler),
    (rf"{PREFIX}/vcs/{VC}/limits/?", VcLimitsHandler),
    (rf"{PREFIX}/me/?", MeHandler),
    (rf"{PREFIX}/usage/?", UsageHandler),
    (rf"{PREFIX}/history/?", HistoryHandler),
    (rf"{PREFIX}/nodes/{NODE}/(?:gpus/(?P<gpu>[^/]+)/)?(?P<action>drain|undrain|healthy)/?", DrainHandler),
    (rf"{PREFIX}/events/?", EventsHandler),
    (rf"{PREFIX}/metrics/?", MetricsHandler),
    (rf"{PREFIX}/spec.yaml", SpecHandler),
    *[(PREFIX + path, handler) for path, handler in SCHEDULE_ROUTES],
    (rf"{PREFIX}/(?P<path>.*)", NotFoundHandler),
]
