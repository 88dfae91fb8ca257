"""The wire types, at the bottom of the package: the job spec and the models, formats and vocabularies
that requests, responses, events and the domain share (the spec, request/response models, job states,
the array spec, ``depends_on``, notebook runs, schedules, event messages).

``api/`` (handlers, OpenAPI) and the domain (``jobs/``, ``execution/``, ``kernels/``, ...) both import
this package; it imports nothing of hive_lab_server above it (``tests/test_import_graph.py`` says so).
"""
