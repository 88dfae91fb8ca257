"""``GET /hive_lab/static/bokeh/bokeh.min.js``: the installed Bokeh's own BokehJS, for the JupyterLab
extension, which draws the charts an array cell saved (Bokeh JSON) without a kernel. Served from the
``bokeh`` package (the version that made the charts), to any logged-in user: it is public library code.
Only the listed file names are served; no path from the request reaches the file system."""

from __future__ import annotations

import pathlib

from jupyter_server.base.handlers import JupyterHandler
from tornado import web

BOKEH_JS_FILES = ("bokeh.min.js", "bokeh-api.min.js", "bokeh-widgets.min.js", "bokeh-tables.min.js",
                  "bokeh-gl.min.js")
ROUTE = r"/hive_lab/static/bokeh/(?P<name>[a-z.-]{1,40})"


def bokeh_js_dir() -> pathlib.Path:
    import bokeh

    return pathlib.Path(bokeh.__file__).parent / "server" / "static" / "js"


class BokehJsHandler(JupyterHandler):
    @web.authenticated
    def get(self, name: str) -> None:
        if name not in BOKEH_JS_FILES:
            raise web.HTTPError(404, f"no such BokehJS file; one of {', '.join(BOKEH_JS_FILES)}")
        data = (bokeh_js_dir() / name).read_bytes()
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.set_header("Cache-Control", "private, max-age=3600")
        self.finish(data)
