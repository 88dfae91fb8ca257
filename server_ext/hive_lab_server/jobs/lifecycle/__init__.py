"""The job lifecycle: one state table (``states``), a pure machine (``machine``)."""
