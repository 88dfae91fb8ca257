"""The REST API: handlers, the formats a job spec is read from, the OpenAPI document, the event outbox and load
shedding. The spec and the request/response models it speaks are the wire types in ``wire/``."""
