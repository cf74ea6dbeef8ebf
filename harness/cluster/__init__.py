"""Clusters the harness tests against: local processes, containers, external and peer targets."""
