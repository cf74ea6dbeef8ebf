"""`kafka-harness run`, registered on the CLI's typer app by :func:`register`.

Kept apart from the app (:mod:`harness.cli.app`) so the run command's options live next to the
runner they map onto; the app only calls ``register(app)``. Options with a fixed set of values
are enums (:mod:`harness.cli.options`), so ``--help`` lists them and the parser refuses others
(exit 2).

A run without ``--dir`` goes to ``.harness/runs/<time>-seed<N>``, and ``.harness/runs/latest``
points at it as it starts (:mod:`harness.run.latest`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.checker.result import SCHEMA_VERSION
from harness.cli.options import Acks, CommitStrategy, ConsumerMode, Engine, Guarantee
from harness.cluster.options import Backend, ClusterTarget, Network
from harness.conformance.matrix import SUITES, parse_list
from harness.errors import UsageError
from harness.nemesis.schedule import FAULTS, parse_faults
from harness.workload.group_protocol import GroupProtocol
from harness.workload.kinds import DEFAULT_ABORT_P, TxnIdPolicy, WorkloadKind


def _parse_suites(text: str, allowed: tuple[str, ...], default: tuple[str, ...]
                  ) -> tuple[str, ...]:
    """``default``, ``none`` (or nothing), or a comma-separated list of suites; UsageError
    naming an unknown one."""
    if text.strip() == "default":
        return default
    if text.strip() in ("", "none"):
        return ()
    return parse_list(text, allowed, "suite")


# The suites a run can start with (the run is the chaos part itself); runner.SUITES, without
# importing the runner (and its client libraries) to build the CLI.
_RUN_SUITES = tuple(suite for suite in SUITES if suite != "chaos")


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_command(
        duration: Annotated[float, typer.Option(help="Seconds of workload (and nemesis).")] = 60.0,
        brokers: Annotated[int, typer.Option(help="Number of brokers.")] = 3,
        nemesis: Annotated[
            str,
            typer.Option(metavar="FAULT[,FAULT...]",
                         help=f"Comma-separated faults from {', '.join(FAULTS)}; or none."),
        ] = "partition,kill",
        seed: Annotated[
            int | None, typer.Option(help="Seed of the nemesis schedule (default: random).")
        ] = None,
        guarantee: Annotated[
            Guarantee, typer.Option(help="Delivery guarantee the run must keep.")
        ] = Guarantee.AT_LEAST_ONCE,
        run_dir: Annotated[
            Path | None,
            typer.Option("--dir", help="Run directory (default ./.harness/runs/<time>-seed<N>, "
                                       "with ./.harness/runs/latest pointing at it)."),
        ] = None,
        json_output: Annotated[
            bool, typer.Option("--json", help="Print one JSON object on stdout.")
        ] = False,
        partitions: Annotated[int, typer.Option(help="Partitions of the workload topic.")] = 3,
        producers: Annotated[int, typer.Option(help="Producer processes.")] = 2,
        consumers: Annotated[int, typer.Option(help="Consumer processes.")] = 2,
        rate: Annotated[float, typer.Option(help="Sends per second, all producers.")] = 100.0,
        consumer_mode: Annotated[ConsumerMode, typer.Option(
            help="Consumers in a group, or assigned their partitions.")] = ConsumerMode.GROUP,
        commit: Annotated[CommitStrategy, typer.Option(
            help="When group consumers commit: auto, or after/before processing.")
        ] = CommitStrategy.AFTER,
        group_protocol: Annotated[GroupProtocol, typer.Option(
            help="The group consumers' protocol: classic (JoinGroup, one generation per group) "
                 "or consumer (KIP-848: ConsumerGroupHeartbeat, an epoch per member; needs "
                 "--consumer-mode group and brokers that offer it, e.g. --target "
                 "apache-kafka-kraft).")] = GroupProtocol.CLASSIC,
        acks: Annotated[Acks, typer.Option(help="Producer acks.")] = Acks.ALL,
        idempotence: Annotated[
            bool, typer.Option(help="Producer enable.idempotence.")
        ] = True,
        engine: Annotated[
            Engine, typer.Option(help="Checker, as `check`'s: auto (python for a short run's "
                                      "history, spark for a big one), spark or python.")
        ] = Engine.AUTO,
        master: Annotated[
            str | None, typer.Option(metavar="SPARK_MASTER", help="Spark master for the check.")
        ] = None,
        suites: Annotated[
            str, typer.Option(metavar="SUITE[,SUITE...]",
                              help="Suites run first against a cluster of the target of their "
                                   f"own: comma-separated from {', '.join(_RUN_SUITES)}; "
                                   "'default' (all of them) or 'none'.")
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
        recipe: Annotated[
            Path | None, typer.Option(metavar="FILE", help="Instead of --target: a cluster of "
                                      "the broker a recipe file describes (docs/recipes.md).")
        ] = None,
        workload: Annotated[WorkloadKind, typer.Option(
            help="What the clients do: produce-consume (idempotent producers, consumers); "
                 "transactions (transactional producers over two topics, read_committed "
                 "consumers and a read_uncommitted group); consume-transform-produce "
                 "(processors turn an input topic into an output topic, offsets committed in "
                 "each transaction). The transactional ones need a target with transactions "
                 "(apache-kafka, apache-kafka-kraft).")] = WorkloadKind.PRODUCE_CONSUME,
        abort_p: Annotated[float, typer.Option(
            help="Transactional workloads: the share of transactions aborted on purpose.")
        ] = DEFAULT_ABORT_P,
        txn_id_policy: Annotated[TxnIdPolicy, typer.Option(
            help="Transactional workloads: fresh (a transactional.id per client process, as "
                 "Jepsen's) or reuse (a replacement takes over its predecessor's id, fencing "
                 "it).")] = TxnIdPolicy.FRESH,
        soak: Annotated[
            bool, typer.Option(help="A soak (e.g. --duration 1800): faults 30-60 s apart, and "
                                    "the run fails when a broker's, ZooKeeper's or the "
                                    "harness's RSS or open files grew > 10 % after warm-up "
                                    "(docs/soak.md).")
        ] = False,
    ) -> None:
        """The main job: the suites against a reference cluster (--suites), then a workload
        under a seeded nemesis, everything read back and checked. Exit 0 valid and every suite
        test passed, 1 an anomaly the guarantee forbids or a failed suite test, 2 bad options,
        3 infrastructure failed, 130 interrupted (Ctrl-C/SIGTERM: everything stopped, the
        history so far kept)."""
        # The runner loads every cluster kind, the clients and the checker: only for a run.
        from harness.run import runner

        try:
            try:
                faults = parse_faults(nemesis)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            chosen_suites = _parse_suites(suites, runner.SUITES, runner.DEFAULT_SUITES)
            if min(partitions, producers + consumers, rate) <= 0:
                raise UsageError("--partitions, --rate and the number of clients must be > 0")
            if recipe is not None and target != ClusterTarget.REFERENCE:
                raise UsageError("--recipe replaces --target: give one of them")
        except UsageError as error:
            if json_output:  # as the runner answers the errors it finds itself
                print(json.dumps({"schema_version": SCHEMA_VERSION, "error": str(error),
                                  "exit_code": int(error.exit_code)}))
            raise
        options = runner.RunOptions(
            duration_s=duration, brokers=brokers, nemesis=faults, seed=seed,
            guarantee=guarantee.value, run_dir=run_dir, partitions=partitions,
            producers=producers, consumers=consumers, rate=rate,
            consumer_mode=consumer_mode.value, commit=commit.value,
            group_protocol=group_protocol, acks=acks.value,
            idempotence=idempotence, engine=engine.value, master=master,
            network=network.value, backend=backend.value,
            target="recipe" if recipe is not None else target.value,
            recipe=str(recipe.resolve()) if recipe is not None else None, suites=chosen_suites,
            soak=soak, workload=workload, abort_p=abort_p, txn_id_policy=txn_id_policy,
        )
        raise typer.Exit(runner.run(options, as_json=json_output))

