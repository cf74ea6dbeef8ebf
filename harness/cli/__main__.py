"""``python -m harness.cli``: the same program as ``kafka-harness``."""

from harness.cli.app import main

if __name__ == "__main__":
    main()
