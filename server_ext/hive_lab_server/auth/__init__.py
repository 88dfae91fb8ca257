"""Who is calling (identity) and what they may do (access)."""
