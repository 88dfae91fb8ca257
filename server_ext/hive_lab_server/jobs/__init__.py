"""Jobs: the service and its parts (admission, lifecycle, recovery, moves, ...), limits, start estimates, arrays and
pipelines. It imports the wire types (``wire/``) and the layers below it, never ``api/``."""
