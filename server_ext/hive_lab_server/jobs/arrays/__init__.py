"""Job arrays and parameter sweeps: one submit makes many elements, each a job of its own (docs/arrays.md).

``spec``: the ``array`` / ``sweep`` fields read into an ``ArrayPlan`` (indices, parameters, throttle);
``feeder``: the service part that keeps an array's pending elements out of the core and releases them
as jobs as the throttle and a small window allow; ``views``: the REST objects of arrays.
"""
