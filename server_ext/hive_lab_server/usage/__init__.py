"""Usage: accounting records, Prometheus metrics and the history export."""
