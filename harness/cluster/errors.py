"""Why a cluster, a target or one of its processes could not start.

Raised deep in the cluster layer and told to the user with exit code 3 by the CLI
(:mod:`harness.cli.exits`), which must know them without loading the backends that raise them.
"""


class PeerStartError(RuntimeError):
    """A process did not come up; the message carries the reason and the tail of its log."""


class TargetError(RuntimeError):
    """The target could not be started or reached (exit code 3 territory)."""
