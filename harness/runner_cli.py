"""`kafka-harness run`, registered on the CLI's typer app by :func:`register`.

Kept apart from harness/cli.py so the run command's options live next to the runner they map
onto; cli.py only calls ``register(app)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.checker.result import DEFAULT_GUARANTEE, GUARANTEES
from harness.cluster.factory import Backend, Network
from harness.cluster.registry import ClusterTarget
from harness.matrix import parse_list
from harness.nemesis.schedule import FAULTS


def _parse_suites(text: str, allowed: tuple[str, ...], default: tuple[str, ...]
                  ) -> tuple[str, ...]:
    """``default``, ``none`` (or nothing), or a comma-separated list of suites; ValueError
    naming an unknown one."""
    if text.strip() == "default":
        return default
    if text.strip() in ("", "none"):
        return ()
    return parse_list(text, allowed, "suite")


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_command(
        duration: Annotated[float, typer.Option(help="Seconds of workload (and nemesis).")] = 60.0,
        brokers: Annotated[int, typer.Option(help="Number of brokers.")] = 3,
        nemesis: Annotated[
            str,
            typer.Option(help=f"Comma-separated faults from {', '.join(FAULTS)}; or none."),
        ] = "partition,kill",
        seed: Annotated[
            int | None, typer.Option(help="Seed of the nemesis schedule (default: random).")
        ] = None,
        guarantee: Annotated[
            str, typer.Option(help=f"Delivery guarantee: {', '.join(GUARANTEES)}.")
        ] = DEFAULT_GUARANTEE,
        run_dir: Annotated[
            Path | None,
            typer.Option("--dir", help="Run directory (default ./.harness/runs/<time>-seed<N>)."),
        ] = None,
        json_output: Annotated[
            bool, typer.Option("--json", help="Print one JSON object on stdout.")
        ] = False,
        partitions: Annotated[int, typer.Option(help="Partitions of the workload topic.")] = 3,
        producers: Annotated[int, typer.Option(help="Producer processes.")] = 2,
        consumers: Annotated[int, typer.Option(help="Consumer processes.")] = 2,
        rate: Annotated[float, typer.Option(help="Sends per second, all producers.")] = 100.0,
        consumer_mode: Annotated[str, typer.Option(help="group or assign.")] = "group",
        commit: Annotated[
            str, typer.Option(help="Group commit strategy: auto, after, before (processing).")
        ] = "after",
        acks: Annotated[str, typer.Option(help="Producer acks: 0, 1, all.")] = "all",
        idempotence: Annotated[
            bool, typer.Option(help="Producer enable.idempotence.")
        ] = True,
        engine: Annotated[
            str, typer.Option(help="Checker: spark (as `check`) or python (small runs).")
        ] = "spark",
        master: Annotated[
            str | None, typer.Option(metavar="SPARK_MASTER", help="Spark master for the check.")
        ] = None,
        suites: Annotated[
            str, typer.Option(help="Suites run first against a reference cluster of their own "
                                   "(comma-separated, 'default' = all but chaos, or none).")
        ] = "default",
        network: Annotated[
            Network, typer.Option(help="Network faults by proxy (Toxiproxy) or kernel (root: "
                                       "namespaces + iptables drops; no latency toxics).")
        ] = Network.PROXY,
        backend: Annotated[
            Backend, typer.Option(help="Where the clusters run: local processes or docker "
                                       "containers.")
        ] = Backend.LOCAL,
        target: Annotated[
            ClusterTarget, typer.Option(help="The brokers: the reference broker or Apache Kafka "
                                         "3.9 (ZooKeeper mode).")
        ] = ClusterTarget.REFERENCE,
    ) -> None:
        """The main job: the suites against a reference cluster (--suites), then a workload
        under a seeded nemesis, everything read back and checked. Exit 0 valid and every suite
        test passed, 1 an anomaly the guarantee forbids or a failed suite test, 2 bad options,
        3 infrastructure failed, 130 interrupted (Ctrl-C/SIGTERM: everything stopped, the
        history so far kept)."""
        from harness import runner
        from harness.nemesis.schedule import parse_faults
        from harness.workload.consumer import COMMITS, MODES

        try:
            faults = parse_faults(nemesis)
            if consumer_mode not in MODES:
                raise ValueError(f"--consumer-mode must be one of {', '.join(MODES)}")
            if commit not in COMMITS:
                raise ValueError(f"--commit must be one of {', '.join(COMMITS)}")
            chosen_suites = _parse_suites(suites, runner.SUITES, runner.DEFAULT_SUITES)
            if acks not in ("0", "1", "all", "-1"):
                raise ValueError("--acks must be one of 0, 1, all")
            if min(partitions, producers + consumers, rate) <= 0:
                raise ValueError("--partitions, --rate and the number of clients must be > 0")
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(runner.USAGE) from None
        options = runner.RunOptions(
            duration_s=duration, brokers=brokers, nemesis=faults, seed=seed,
            guarantee=guarantee, run_dir=run_dir, partitions=partitions, producers=producers,
            consumers=consumers, rate=rate, consumer_mode=consumer_mode, commit=commit,
            acks=acks, idempotence=idempotence, engine=engine, master=master,
            network=network.value, backend=backend.value, target=target.value,
            suites=chosen_suites,
        )
        raise typer.Exit(runner.run(options, as_json=json_output))
