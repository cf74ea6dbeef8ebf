"""The supervisor: the one process that owns a cluster started by ``kafka-harness up``, so that
separate shells can fault it through its control socket (``python -m harness.supervisor``)."""
