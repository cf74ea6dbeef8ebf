"""The pytest plugin (entry point ``pytest11``, name ``kafka_harness``): options, fixtures,
markers, and the cleanup of what a session made on a broker it does not own."""
