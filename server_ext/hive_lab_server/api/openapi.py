"""The OpenAPI 3.1 document of the REST API, generated from the pydantic request models (``spec``) and
response models (``models``) plus the route table the server registers its handlers from
(``api/handlers/__init__.py``, shaped by ``api/routes.py``): limits such as ``command``'s length or
``cpuNumber``'s range exist in one place only, and no path is written here by hand. Served at
``GET spec.yaml``; print it with ``python -m hive_lab_server.api.openapi``.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from hive_lab_server.wire import models
from hive_lab_server.version import __version__
from hive_lab_server.api.routes import REF, openapi_paths
from hive_lab_server.wire.spec import JobSpec, PaiJob

DESCRIPTION = """The hive-lab scheduler inside the Jupyter server. Paths are relative to `<base_url>hive_lab/api/`.
Every request is authenticated by jupyter_server (`Authorization: token <t>` or the browser's cookie +
`_xsrf`; 401 without either) and authorized for the resource `hive_lab`. No text a request sends may hold a
NUL character (\\u0000; a job's staged files' contents aside): a 400 names the field. Errors are
`{"error": "<what to change>", "field": "<field or null>"}`. Each operation's `x-who` says who may call it.
Generated from the server's pydantic models and its route table; see docs/rest-api.md."""


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The whole document as a dict (built once per process)."""
    from hive_lab_server.api.handlers import TABLE  # (lazy: the handlers import the service)
    from hive_lab_server.api.handlers.arrays import array_spec_schema
    from hive_lab_server.wire.schedule_models import SCHEMA_MODELS

    schema_models = [JobSpec, PaiJob, models.VcLimitsBody, *models.RESPONSE_MODELS, *SCHEMA_MODELS]
    _, defs = models_json_schema([(mdl, "validation") for mdl in schema_models], ref_template=REF)
    defs["$defs"]["ArraySpec"] = array_spec_schema(defs["$defs"]["JobSpec"])
    return {
        "openapi": "3.1.0",
        "info": {"title": "hive-lab REST API", "version": __version__, "description": DESCRIPTION},
        "servers": [{"url": "/hive_lab/api"}],
        "security": [{"token": []}],
        "paths": openapi_paths(TABLE),
        "components": {
            "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "Authorization",
                                          "description": "`token <jupyter token>`"}},
            "schemas": defs["$defs"],
        },
    }


@functools.cache
def openapi_yaml() -> bytes:
    import yaml

    return yaml.safe_dump(openapi_document(), sort_keys=False, allow_unicode=True).encode()


if __name__ == "__main__":
    import sys

    sys.stdout.write(openapi_yaml().decode())
