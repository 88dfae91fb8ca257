"""Time-sharing: Gavel-style rounds, elastic jobs, the round cache and progress reports."""
