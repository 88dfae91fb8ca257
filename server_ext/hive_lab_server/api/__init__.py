"""The REST API: handlers, request/response models, the job spec and the formats it is read from, the OpenAPI document, the event stream and load shedding."""
