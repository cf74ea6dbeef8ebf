"""Clients that record histories (HISTORY.md), the generator that runs them as processes, and
the final read that closes a run."""
