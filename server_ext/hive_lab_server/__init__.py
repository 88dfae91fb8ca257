"""hive_lab_server: the Jupyter server extension hosting the hive-lab scheduler service."""

from hive_lab_server.version import __version__  # noqa: F401
from hive_lab_server import moved as _moved

_moved.install()  # old import paths (admins' configs) keep working, with a warning naming the new one


def _jupyter_server_extension_points():
    return [{"module": "hive_lab_server.app", "app": _app_class()}]


def _app_class():
    from hive_lab_server.app import HiveLabApp

    return HiveLabApp
