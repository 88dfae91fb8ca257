"""Jobs: the service and its parts (admission, lifecycle, recovery, moves, ...), limits, staging, start estimates, arrays and pipelines."""
