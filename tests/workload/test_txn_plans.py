"""The transactional workloads' plans, without a broker: which clients a run starts and with
what settings, how transactions are spread over partitions, how transactional ids are named,
and which options are refused before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.runner import USAGE, RunError, RunOptions
from harness.workload import client
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import RunContext
from harness.workload.generator import WorkloadSpec
from harness.workload.group_protocol import GroupProtocol
from harness.workload.kinds import Isolation, TxnIdPolicy, WorkloadKind, workload_problems
from harness.workload.plans import Plan
from harness.workload.transactions import TxnProducerSpec, TxnSettings, transactional_id
from harness.workload.transform import ProcessorSpec

from .test_run import kafka_harness

REFERENCE_RECIPE = Path(__file__).parents[2] / "harness" / "recipes" / "reference.toml"

NOWHERE = "127.0.0.1:1"


def _plan(kind: WorkloadKind, *, producers: int = 2, consumers: int = 3,
          policy: TxnIdPolicy = TxnIdPolicy.FRESH) -> Plan:
    base = WorkloadSpec(NOWHERE, ("ignored",), producers=producers, consumers=consumers,
                        rate=100.0, group="run-1-group")
    return Plan(kind, base, "workload", 3, "run-1", 0.25, policy, seed=7)


def test_a_transaction_spans_both_topics_and_several_partitions():
    spec = TxnProducerSpec(NOWHERE, ("a", "b"), TxnSettings("t"), partitions=3, sends_per_txn=4)
    for txn in range(6):
        placed = [spec.placement(txn, n) for n in range(4)]
        assert {topic for topic, _ in placed} == {"a", "b"}
        assert len({partition for _, partition in placed}) == 2
        assert len(set(placed)) == 4
    firsts = {spec.placement(txn, 0)[1] for txn in range(3)}
    assert firsts == {0, 1, 2}  # consecutive transactions move over every partition


def test_fresh_ids_are_per_process_and_reused_ids_per_slot():
    assert transactional_id("run-1-txn-0", TxnIdPolicy.FRESH, 5) == "run-1-txn-0-p5"
    assert transactional_id("run-1-txn-0", TxnIdPolicy.FRESH, 9) == "run-1-txn-0-p9"
    assert transactional_id("run-1-txn-0", TxnIdPolicy.REUSE, 5) == "run-1-txn-0"
    assert transactional_id("run-1-txn-0", TxnIdPolicy.REUSE, 9) == "run-1-txn-0"


def test_a_transactions_plan_has_transactional_producers_and_a_read_uncommitted_group():
    roles = _plan(WorkloadKind.TRANSACTIONS, consumers=3).roles()
    producers = [spec for role, spec in roles if role == "txn-producer"]
    consumers = [spec for role, spec in roles if role == "consumer"]
    assert len(roles) == 5 and len(producers) == 2 and len(consumers) == 3
    assert all(isinstance(p, TxnProducerSpec) and p.topics == ("workload", "workload-2")
               and p.txn.abort_p == 0.25 and p.txn.seed == 7 and p.rate == 50.0
               and p.partitions == 3 for p in producers)
    assert [p.txn.transactional_id for p in producers] == ["run-1-txn-0", "run-1-txn-1"]
    assert [(c.group, c.isolation) for c in consumers] == [
        ("run-1-group", Isolation.READ_COMMITTED), ("run-1-group", Isolation.READ_COMMITTED),
        ("run-1-group-uncommitted", Isolation.READ_UNCOMMITTED)]
    assert all(isinstance(c, ConsumerSpec) and c.topics == ("workload", "workload-2")
               for c in consumers)
    one = _plan(WorkloadKind.TRANSACTIONS, consumers=1).roles()
    assert [s.isolation for r, s in one if r == "consumer"] == [Isolation.READ_COMMITTED]


def test_a_consume_transform_produce_plan_feeds_the_input_and_processes_it_in_one_group():
    roles = _plan(WorkloadKind.CONSUME_TRANSFORM_PRODUCE, producers=1, consumers=2,
                  policy=TxnIdPolicy.REUSE).roles()
    assert [role for role, _ in roles] == ["producer", "processor", "processor"]
    feeder = roles[0][1]
    assert feeder.topics == ("workload",) and feeder.idempotence and feeder.acks == "all"
    processors = [spec for _, spec in roles[1:]]
    assert all(isinstance(p, ProcessorSpec) and p.input_topic == "workload"
               and p.output_topic == "workload-out" and p.group == "run-1-group"
               and p.txn.id_policy is TxnIdPolicy.REUSE for p in processors)
    assert [p.txn.transactional_id for p in processors] == ["run-1-processor-0",
                                                             "run-1-processor-1"]
    assert processors[0].consumer_spec().isolation is Isolation.READ_COMMITTED
    assert processors[0].consumer_spec().client_config(3)["isolation.level"] == "read_committed"
    assert processors[0].consumer_spec().client_config(3)["enable.auto.commit"] is False


def test_the_first_workload_plan_is_unchanged():
    plan = _plan(WorkloadKind.PRODUCE_CONSUME)
    assert plan.roles() == WorkloadSpec(NOWHERE, ("workload",), producers=2, consumers=3,
                                        rate=100.0, group="run-1-group").roles()
    assert all(spec.isolation is None for role, spec in plan.roles() if role == "consumer")


@pytest.mark.parametrize("spec", [
    TxnProducerSpec(NOWHERE, ("a", "b"), TxnSettings("t", TxnIdPolicy.REUSE, 0.5, 3)),
    ProcessorSpec(NOWHERE, "in", "out", "g", TxnSettings("t", TxnIdPolicy.REUSE),
                  group_protocol=GroupProtocol.CONSUMER),
    ConsumerSpec(NOWHERE, ("a",), isolation=Isolation.READ_UNCOMMITTED),
], ids=["txn-producer", "processor", "consumer"])
def test_specs_reach_the_client_process_unchanged(spec):
    role = {TxnProducerSpec: "txn-producer", ProcessorSpec: "processor",
            ConsumerSpec: "consumer"}[type(spec)]
    argv = client.command(role, spec, RunContext("/nowhere", "run-1", 1, 0, 1))
    document = json.loads(argv[-1])
    spec_class, _ = client.ROLES[document["role"]]
    assert client._as_spec(spec_class, document["spec"]) == spec


def test_options_a_transactional_workload_cannot_run_with_are_refused(tmp_path):
    assert workload_problems("transactions", "fresh", abort_p=0.1,
                             producers=2, consumers=2) == []
    assert workload_problems("transactions", "fresh", abort_p=1.5,
                             producers=2, consumers=2) == [
        "--abort-p must be within [0, 1], got 1.5"]
    assert workload_problems("consume-transform-produce", "reuse",
                             abort_p=0.1, producers=0, consumers=2) == [
        "--workload consume-transform-produce needs at least one producer (to fill the input "
        "topic) and one consumer (a processor)"]
    assert workload_problems("nope", "fresh", abort_p=0.1,
                             producers=1, consumers=1)[0].startswith("--workload must be one of")
    assert workload_problems("produce-consume", "fresh", abort_p=0.1,
                             producers=1, consumers=1, acks="1", idempotence=False,
                             consumer_mode="assign") == []
    assert workload_problems("transactions", "fresh", abort_p=0.1,
                             producers=1, consumers=1, acks="1") == [
        "--workload transactions: transactional producers are acks=all and idempotent (Kafka "
        "requires it); drop --acks and --no-idempotence"]
    assert workload_problems("transactions", "fresh", abort_p=0.1,
                             producers=1, consumers=1, idempotence=False, acks="-1",
                             consumer_mode="assign") == [
        "--workload transactions: transactional producers are acks=all and idempotent (Kafka "
        "requires it); drop --acks and --no-idempotence"]
    assert workload_problems("consume-transform-produce", "fresh",
                             abort_p=0.1, producers=1, consumers=1, acks="1",
                             idempotence=False, consumer_mode="assign") == [
        "--workload consume-transform-produce: its processors are one consumer group (their "
        "offsets commit with their transactions); drop --consumer-mode assign"]
    RunOptions(workload=WorkloadKind.TRANSACTIONS).validate()  # the reference broker has them
    with pytest.raises(RunError) as refused:
        RunOptions(workload=WorkloadKind.TRANSACTIONS, target="recipe",
                   recipe=str(_recipe_without_transactions(tmp_path))).validate()
    assert refused.value.code == USAGE
    assert "needs transactions, which the recipe" in str(refused.value)


def test_the_cli_refuses_a_transactional_workload_on_a_recipe_without_transactions(tmp_path):
    """Every built-in target has transactions; a recipe claims them or not, and one that does
    not is refused before anything starts."""
    recipe = _recipe_without_transactions(tmp_path)
    run_dir = tmp_path / "run"
    done = kafka_harness("run", "--recipe", str(recipe), "--workload",
                         "consume-transform-produce", "--suites", "none", "--dir", str(run_dir),
                         "--json", timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert (f"--workload consume-transform-produce needs transactions, which the recipe "
            f"{recipe} does not claim") in json.loads(done.stdout)["error"]
    assert not run_dir.exists()
    unknown = kafka_harness("run", "--workload", "exactly-twice", "--dir", str(run_dir),
                            timeout=120)
    assert unknown.returncode == 2 and "exactly-twice" in unknown.stderr


def _recipe_without_transactions(tmp_path: Path) -> Path:
    """The shipped reference recipe, its claim to transactions taken out."""
    text = REFERENCE_RECIPE.read_text()
    assert ', "transactions"]' in text
    recipe = tmp_path / "no-transactions.toml"
    recipe.write_text(text.replace(', "transactions"]', "]"))
    return recipe


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, timeout=300, check=False,
                          cwd=Path(__file__).parents[2])


def test_the_chaos_suite_takes_a_workload_and_skips_transactions_without_them(tmp_path):
    refused = _pytest("suites/chaos/test_chaos.py", "--kafka-chaos-workload", "twice",
                      "--collect-only")
    assert refused.returncode == 4 and "invalid choice: 'twice'" in refused.stderr
    done = _pytest("suites/chaos/test_chaos.py", "-k", "short", "-rs",
                   "--kafka-chaos-workload", "transactions",
                   "--kafka-recipe", str(_recipe_without_transactions(tmp_path)))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout
    assert "--kafka-chaos-workload transactions: needs a target that implements transactions; " \
           "the 'recipe' target does not offer it" in done.stdout
