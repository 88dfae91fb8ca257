"""``python -m hive_lab_server``: a Jupyter server with hive-lab; ``--help-all`` lists every option
(HiveLabApp's and the launchers')."""

from hive_lab_server.app import HiveLabApp

if __name__ == "__main__":
    HiveLabApp.launch_instance()
