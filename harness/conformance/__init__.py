"""Conformance: where the suites are found, the matrix that runs them against several targets,
each session's outcomes and live progress, and hostile frames over a real socket."""
