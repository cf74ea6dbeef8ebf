"""One run end to end (``kafka-harness run``): cluster up, workload and nemesis, heal, final
read, check, report — and what a run leaves for the next one (``latest``, the replay command)."""
