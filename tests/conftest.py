"""Suite-wide: pytest's own `pytester`, for testing the kafka-harness pytest plugin."""

pytest_plugins = ["pytester"]
