"""hive_lab_server: the Jupyter server extension hosting the hive-lab scheduler service."""

from hive_lab_server.version import __version__  # noqa: F401


def _jupyter_server_extension_points():
    return [{"module": "hive_lab_server.app", "app": _app_class()}]


def _app_class():
    from hive_lab_server.app import HiveLabApp

    return HiveLabApp
