"""The pytest plugin's command-line options, read once into one typed value.

Every option carries the ``--kafka-`` prefix, so the plugin can be installed next to a user's
own conftest (which may well have a ``--target`` or ``--backend`` of its own). The names of the
first release (``--target``, ``--bootstrap``, …) still work for one release: given, they warn
and fill the prefixed option, and giving both spellings is a usage error.

Code reads :func:`kafka_options` (a frozen :class:`KafkaOptions`), never ``getoption`` with a
string, so a renamed option is one edit here.
"""

from __future__ import annotations

import argparse
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.cluster.options import Backend, Network, TargetName, check_options
from harness.cluster.recipe import load_recipe
from harness.workload.kinds import WorkloadKind

_OPTIONS = pytest.StashKey["KafkaOptions"]()

# The first release's option names and what replaced them (kept one release, with a warning).
RENAMED = {
    "--target": "--kafka-target",
    "--bootstrap": "--kafka-bootstrap-server",
    "--brokers": "--kafka-brokers",
    "--network": "--kafka-network",
    "--backend": "--kafka-backend",
    "--harness-dir": "--kafka-harness-dir",
    "--chaos-duration": "--kafka-chaos-duration",
    "--chaos-long-duration": "--kafka-chaos-long-duration",
    "--chaos-seed": "--kafka-chaos-seed",
}


@dataclass(frozen=True)
class KafkaOptions:
    """What the session runs against and how; one per pytest process (one per xdist worker)."""

    target: TargetName
    bootstrap: str | None
    brokers: int
    network: Network
    backend: Backend
    harness_dir: Path | None
    recipe: Path | None
    chaos_duration_s: float
    chaos_long_duration_s: float
    chaos_seed: int | None
    chaos_workload: WorkloadKind
    """What the chaos suite's clients do (``--kafka-chaos-workload``, harness.workload.kinds)."""
    controllers: int
    """Dedicated KRaft controllers (``--kafka-controllers``); 0 for a combined quorum."""
    name_prefix: str
    """Every topic, group and transactional id the suites make starts with this, so a shared
    broker can be cleaned of exactly what this session made (see harness.plugin.cleanup)."""

    @property
    def started_by_harness(self) -> bool:
        return self.target != TargetName.EXTERNAL


def _dest(option: str) -> str:
    return option.removeprefix("--").replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-harness", "kafka-harness targets")
    group.addoption("--kafka-target", choices=[t.value for t in TargetName], default="reference",
                    help="what the tests run against (default: reference)")
    group.addoption("--kafka-bootstrap-server", default=None, metavar="HOST:PORT[,...]",
                    help="test the broker at this address (implies --kafka-target external)")
    group.addoption("--kafka-brokers", type=int, default=3,
                    help="brokers of a cluster the harness starts (default: 3)")
    group.addoption("--kafka-controllers", type=int, default=0,
                    help="apache-kafka-kraft: dedicated controllers forming the quorum "
                         "(default 0: every broker is also a voter)")
    group.addoption("--kafka-network", choices=[n.value for n in Network], default="proxy",
                    help="how network faults are made: proxy (Toxiproxy on every link, "
                         "default) or kernel (root: namespaces + iptables drops, no toxics)")
    group.addoption("--kafka-backend", choices=[b.value for b in Backend], default="local",
                    help="where a cluster the harness starts runs: local processes (default) "
                         "or docker containers")
    group.addoption("--kafka-harness-dir", default=None, metavar="DIR",
                    help="keep the started target's logs here (default: a temporary directory, "
                         "removed unless a test failed)")
    group.addoption("--kafka-recipe", default=None, metavar="FILE",
                    help="start a cluster of the broker a recipe file describes")
    group.addoption("--kafka-chaos-duration", type=float, default=20.0, metavar="S",
                    help="seconds of workload under the nemesis in the short chaos run "
                         "(default 20)")
    group.addoption("--kafka-chaos-long-duration", type=float, default=600.0, metavar="S",
                    help="seconds of the long chaos run (marked slow; default 600)")
    group.addoption("--kafka-chaos-seed", type=int, default=None, metavar="N",
                    help="the nemesis seed (default: a new one per run, printed so a failing "
                         "run can be replayed)")
    group.addoption("--kafka-chaos-workload", choices=[k.value for k in WorkloadKind],
                    default=WorkloadKind.PRODUCE_CONSUME.value,
                    help="what the chaos suite's clients do: produce-consume (default), "
                         "transactions or consume-transform-produce (these two need a target "
                         "with transactions; the chaos tests skip on one without)")
    for old, new in RENAMED.items():
        typed: dict[str, Callable[[str], object]] = {}
        if new in ("--kafka-brokers", "--kafka-chaos-seed"):
            typed = {"type": int}
        elif new in ("--kafka-chaos-duration", "--kafka-chaos-long-duration"):
            typed = {"type": float}
        group.addoption(old, dest=f"deprecated_{_dest(old)}", default=None,
                        help=argparse.SUPPRESS, **typed)


def _take_renamed(config: pytest.Config) -> None:
    """Move each old spelling the user gave onto its new option, with a deprecation warning."""
    for old, new in RENAMED.items():
        value = getattr(config.option, f"deprecated_{_dest(old)}")
        if value is None:
            continue
        if new in _given(config):
            raise pytest.UsageError(f"{old} and {new} given together; {old} is the old name "
                                    f"of {new}")
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(
            f"{old} is deprecated and will be removed in the next release; use {new}"),
            stacklevel=2)
        setattr(config.option, _dest(new), value)


def _given(config: pytest.Config) -> set[str]:
    return {arg.split("=", 1)[0] for arg in config.invocation_params.args
            if isinstance(arg, str) and arg.startswith("--kafka-")}


def configure(config: pytest.Config) -> KafkaOptions:
    """Read, check and stash the options; a bad combination is a pytest usage error."""
    _take_renamed(config)
    get = config.getoption
    bootstrap = get("--kafka-bootstrap-server")
    target = get("--kafka-target")
    if bootstrap and "--kafka-target" not in _given(config) and target == "reference":
        target = TargetName.EXTERNAL.value  # a bootstrap server alone means "test that broker"
    recipe = get("--kafka-recipe")
    if recipe:  # a recipe alone means "a cluster of that broker"
        if "--kafka-target" in _given(config) and target != TargetName.RECIPE:
            raise pytest.UsageError(f"--kafka-recipe is for --kafka-target recipe, not "
                                    f"{target!r}")
        target = TargetName.RECIPE.value
    try:
        check_options(target, bootstrap, get("--kafka-brokers"), get("--kafka-network"),
                      get("--kafka-backend"), recipe=load_recipe(recipe) if recipe else None,
                      controllers=get("--kafka-controllers"))
    except ValueError as exc:
        raise pytest.UsageError(_plugin_spelling(str(exc))) from None
    harness_dir = get("--kafka-harness-dir")
    options = KafkaOptions(
        target=TargetName(target), bootstrap=bootstrap, brokers=get("--kafka-brokers"),
        network=Network(get("--kafka-network")), backend=Backend(get("--kafka-backend")),
        harness_dir=Path(harness_dir) if harness_dir else None,
        recipe=Path(recipe) if recipe else None,
        chaos_duration_s=get("--kafka-chaos-duration"),
        chaos_long_duration_s=get("--kafka-chaos-long-duration"),
        chaos_seed=get("--kafka-chaos-seed"),
        chaos_workload=WorkloadKind(get("--kafka-chaos-workload")),
        controllers=get("--kafka-controllers"),
        name_prefix=f"kh-{uuid.uuid4().hex[:8]}-")
    config.stash[_OPTIONS] = options
    return options


def _plugin_spelling(message: str) -> str:
    """The shared option checks name the command line's options (``--network``); here they
    are ``--kafka-network``."""
    return re.sub(r"(?<![\w-])--(bootstrap-server|brokers|controllers|network|backend|target)\b",
                  r"--kafka-\1", message)


def kafka_options(config: pytest.Config) -> KafkaOptions:
    """The session's options (the plugin reads them at configure time)."""
    return config.stash[_OPTIONS]


def scoped_name(prefix: str, test_name: str, kind: str = "") -> str:
    """A Kafka-legal name under ``prefix``: the kind (topic, group, …), the test's own name and
    a random suffix, so concurrent tests and sessions never share one."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "-", test_name)[:60]
    middle = f"{kind}-" if kind else ""
    return f"{prefix}{middle}{base}-{uuid.uuid4().hex[:8]}"
