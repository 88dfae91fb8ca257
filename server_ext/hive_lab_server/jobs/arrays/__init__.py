"""Job arrays and parameter sweeps: one submit makes many elements, each a job of its own (docs/arrays.md).

``wire.array_spec`` (a wire type, at the bottom): the ``array`` / ``sweep`` fields read into an ``ArrayPlan``;
``feeder``: the service part that keeps an array's pending elements out of the core and releases them
as jobs as the throttle and a small window allow; ``views``: the REST objects of arrays.
"""
