"""Pipelines and recurring work (issue 27): job dependencies (``dependencies``, ``depends_spec``) and
recurring jobs (``schedules``, ``cron``). Each module is a small part the service composes; none
imports the service."""
