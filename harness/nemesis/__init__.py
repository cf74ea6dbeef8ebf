"""Faults on demand (Jepsen's "nemesis"): network faults on the links, process faults."""
