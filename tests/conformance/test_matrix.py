"""The conformance matrix: outcomes per test per target, and the rule a failing peer breaks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.cluster.options import Backend
from harness.conformance import matrix
from harness.conformance.matrix import TargetRun
from harness.conformance.progress import LineProgress
from harness.conformance.suites import suites_dir

DEMO_SUITE = '''
import pytest


def test_everyone_passes(cluster):
    """A broker answers Metadata with at least one broker [protocol guide, Metadata]."""
    assert cluster.bootstrap


def test_only_real_brokers_pass(cluster):
    """The target is not a test double [made up for this test]."""
    assert cluster.kind != "librdkafka-mock", "a mock cluster answered"


@pytest.mark.requires_zookeeper
def test_needs_zookeeper(cluster):
    """Brokers register in ZooKeeper [Kafka docs, ZooKeeper mode]."""
    assert cluster.nodes.registered_broker_ids()
'''


def _run(target: str, outcomes: dict[str, str]) -> TargetRun:
    tests = [{"nodeid": f"suites/protocol/test_x.py::{name}", "outcome": outcome,
              "reason": f"why {name} on {target}" if outcome != "passed" else "",
              "duration_s": 0.1, "rule": f"rule of {name} | with a pipe"}
             for name, outcome in outcomes.items()]
    return TargetRun(target, 0, 1.0, tests)


def test_markdown_quotes_the_rule_a_peer_breaks_and_counts_per_suite():
    runs = [_run("reference", {"a": "passed", "b": "passed"}),
            _run("tansu", {"a": "failed", "b": "skipped"})]
    text = matrix.render_markdown(runs)
    assert "| protocol | 2 passed | 1 failed, 1 skipped |" in text
    assert ("- **tansu** `suites/protocol/test_x.py::a` — rule: rule of a | with a pipe — "
            "observed: why a on tansu") in text
    assert "| `protocol/test_x.py::a` | pass | **FAIL** |" in text
    assert "- tansu (1): why b on tansu" in text


def test_a_peers_failure_says_what_apache_kafka_did_with_the_same_test():
    runs = [_run("apache-kafka", {"a": "passed", "b": "skipped"}),
            _run("tansu", {"a": "failed", "b": "failed"})]
    text = matrix.render_markdown(runs)
    assert ("observed: why a on tansu — Apache Kafka instead: apache-kafka: passed (its answer "
            "meets the rule)") in text
    assert "observed: why b on tansu — Apache Kafka instead: apache-kafka: skipped (why b on " \
           "apache-kafka)" in text
    assert "Apache Kafka instead: apache-kafka: passed" in matrix.render_html(runs)
    alone = matrix.render_markdown([_run("tansu", {"a": "failed"})])
    assert "Apache Kafka instead" not in alone


def test_html_escapes_and_marks_each_cell():
    runs = [_run("reference", {"a": "passed"}), _run("tansu", {"a": "error"})]
    runs[1].tests[0]["reason"] = "<script>x</script>"
    page = matrix.render_html(runs)
    assert "<script>x" not in page
    assert '<td class="error" title="&lt;script&gt;x&lt;/script&gt;">error</td>' in page


def test_by_default_the_reference_broker_and_apache_kafka_gate_and_peers_are_findings():
    peer_failure = [_run("reference", {"a": "passed"}), _run("tansu", {"a": "failed"})]
    assert matrix.exit_code(peer_failure) == 0
    assert matrix.exit_code([_run("reference", {"a": "failed"})]) == 1
    assert matrix.exit_code([_run("apache-kafka", {"a": "failed"})]) == 1
    assert matrix.exit_code([_run("apache-kafka-kraft", {"a": "error"})]) == 1
    assert matrix.exit_code([_run("reference", {"a": "passed"}),
                             TargetRun("tansu", 4, 0.5)]) == 3


def test_a_target_the_user_named_gates_the_exit_code():
    """A user gating their broker's pull requests names it; its failure must fail the job."""
    targets, gating = matrix.chosen_targets(("reference", "tansu"), None)
    assert targets == ("reference", "tansu")
    failing_tansu = [_run("reference", {"a": "passed"}), _run("tansu", {"a": "failed"})]
    assert matrix.exit_code(failing_tansu, gating) == 1
    assert matrix.chosen_targets(None, None) == (matrix.DEFAULT_TARGETS, matrix.DEFAULT_GATING)


def test_bootstrap_alone_means_test_that_broker():
    assert matrix.chosen_targets(None, "127.0.0.1:9092") == (("external",),
                                                            frozenset({"external"}))
    targets, gating = matrix.chosen_targets(("reference",), "127.0.0.1:9092")
    assert targets == ("reference", "external") and gating == {"reference", "external"}
    assert matrix.exit_code([_run("external", {"a": "failed"})], gating) == 1


def test_a_recipe_alone_means_test_that_cluster_and_reaches_its_session_only(tmp_path):
    recipe = tmp_path / "mine.toml"
    assert matrix.chosen_targets(None, None, recipe) == (("recipe",), frozenset({"recipe"}))
    targets, _ = matrix.chosen_targets(("reference",), None, recipe)
    assert targets == ("reference", "recipe")
    command = matrix.pytest_command("recipe", ("failover",), Path("r.json"), Path("j.xml"),
                                    recipe=recipe)
    assert command[command.index("--kafka-recipe") + 1] == str(recipe.resolve())


def test_the_backend_reaches_the_reference_session_only():
    command = matrix.pytest_command("reference", ("protocol",), Path("r.json"), Path("j.xml"),
                                    backend=Backend.DOCKER)
    assert command[command.index("--kafka-backend") + 1] == "docker"
    local = matrix.pytest_command("reference", ("protocol",), Path("r.json"), Path("j.xml"))
    assert "--kafka-backend" not in local


def test_the_sessions_use_the_plugins_prefixed_options_and_the_located_suites():
    """The old option names warn, and the project's pytest config makes a warning an error."""
    command = matrix.pytest_command("external", ("protocol", "groups"), Path("r.json"),
                                    Path("j.xml"), bootstrap="127.0.0.1:9092")
    assert command[command.index("--kafka-target") + 1] == "external"
    assert command[command.index("--kafka-bootstrap-server") + 1] == "127.0.0.1:9092"
    assert not {"--target", "--bootstrap", "--backend"} & set(command)
    where = suites_dir()
    assert str(where / "protocol") in command and str(where / "groups") in command
    assert command[command.index("--rootdir") + 1] == str(where.parent)


def test_node_ids_name_their_suite_from_a_checkout_or_an_installed_package():
    for prefix in ("suites/", "kafka_harness_suites/", ""):
        nodeid = f"{prefix}groups/test_join_group.py::test_x"
        assert matrix.suite_of(nodeid) == "groups"
        assert matrix.short_nodeid(nodeid) == "groups/test_join_group.py::test_x"


def test_matrix_json_carries_its_schema_version(tmp_path: Path):
    runs = [_run("reference", {"a": "passed"})]
    paths = matrix.write(runs, tmp_path)
    written = json.loads(Path(paths["json"]).read_text())
    assert written["schema_version"] == matrix.SCHEMA_VERSION == 1
    assert written["targets"][0]["target"] == "reference"
    summary = matrix.summary_json(runs, 0, paths)
    assert summary["schema_version"] == 1 and summary["targets"] == {"reference": {"passed": 1}}


def test_parse_list_names_the_unknown_and_the_allowed():
    assert matrix.parse_list("groups, protocol", matrix.SUITES, "suite") == ("groups", "protocol")
    try:
        matrix.parse_list("protocol,nope", matrix.SUITES, "suite")
    except matrix.MatrixError as exc:
        assert "unknown suite nope; allowed: protocol, offsets" in str(exc)
    else:
        raise AssertionError("an unknown suite was accepted")


def test_matrix_runs_real_targets_in_their_own_sessions(tmp_path: Path):
    where = tmp_path / "project" / "suites"
    (where / "protocol").mkdir(parents=True)
    (where / "protocol" / "test_demo.py").write_text(DEMO_SUITE)
    out = tmp_path / "out"
    said: list[str] = []
    runs, paths = matrix.run_matrix(("reference", "librdkafka-mock"), ("protocol",), out,
                                    where=where, say=said.append,
                                    progress=LineProgress(said.append, every=1))
    by_target = {run.target: {t["nodeid"].rsplit("::", 1)[1]: t for t in run.tests}
                 for run in runs}
    assert {n: t["outcome"] for n, t in by_target["reference"].items()} == {
        "test_everyone_passes": "passed", "test_only_real_brokers_pass": "passed",
        "test_needs_zookeeper": "passed"}
    mock = by_target["librdkafka-mock"]
    assert mock["test_everyone_passes"]["outcome"] == "passed"
    assert mock["test_only_real_brokers_pass"]["outcome"] == "failed"
    assert "a mock cluster answered" in mock["test_only_real_brokers_pass"]["reason"]
    assert mock["test_needs_zookeeper"]["outcome"] == "skipped"
    assert "exposes a ZooKeeper" in mock["test_needs_zookeeper"]["reason"]
    assert matrix.exit_code(runs) == 0
    markdown = Path(paths["markdown"]).read_text()
    assert "rule: The target is not a test double [made up for this test]" in markdown
    assert json.loads(Path(paths["json"]).read_text())["targets"][0]["target"] == "reference"
    assert (out / "librdkafka-mock.xml").exists()
    # The log path first, then the counts as the tests end (each poll shows what it found).
    assert said.index(f"  reference: log {out.resolve() / 'reference.log'}") < said.index(
        next(line for line in said if line.startswith("  reference: 3 passed so far")))
    assert any(line.startswith("  librdkafka-mock: 1 passed, 1 failed, 1 skipped so far")
               for line in said)


def test_cli_rejects_an_unknown_suite_with_exit_2():
    result = subprocess.run([sys.executable, "-m", "harness.cli", "matrix", "--suites", "nope"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown suite nope" in result.stderr


def test_matrix_runs_the_suites_where_an_installed_package_keeps_them(tmp_path: Path):
    """The suites as the wheel installs them (package kafka_harness_suites, no checkout around
    it): the session runs from there and its node ids still name their suite."""
    where = tmp_path / "site-packages" / "kafka_harness_suites"
    shutil.copytree(suites_dir(), where, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    runs, paths = matrix.run_matrix(("librdkafka-mock",), ("protocol",), out, where=where,
                                    keyword="test_every_broker_advertises_api_versions",
                                    say=lambda _text: None)
    (test,) = runs[0].tests
    assert test["nodeid"].startswith("kafka_harness_suites/protocol/test_api_versions.py::")
    assert test["outcome"] == "passed", runs[0].log
    assert "| protocol | 1 passed |" in Path(paths["markdown"]).read_text()
