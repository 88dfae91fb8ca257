"""Pipelines and recurring work (issue 27): job dependencies (``dependencies``) and recurring jobs
(``schedules``, ``cron``); the fields and models they read are wire types (``wire.depends_spec``,
``wire.schedule_models``). Each module is a small part the service composes; none imports the service."""
