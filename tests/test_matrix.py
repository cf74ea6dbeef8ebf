"""The conformance matrix: outcomes per test per target, and the rule a failing peer breaks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness import matrix
from harness.matrix import TargetRun

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


def test_the_backend_reaches_the_reference_session_only():
    command = matrix.pytest_command("reference", ("protocol",), Path("r.json"), Path("j.xml"),
                                    backend="docker")
    assert command[command.index("--backend") + 1] == "docker"
    local = matrix.pytest_command("reference", ("protocol",), Path("r.json"), Path("j.xml"))
    assert "--backend" not in local


def test_parse_list_names_the_unknown_and_the_allowed():
    assert matrix.parse_list("groups, protocol", matrix.SUITES, "suite") == ("groups", "protocol")
    try:
        matrix.parse_list("protocol,nope", matrix.SUITES, "suite")
    except matrix.MatrixError as exc:
        assert "unknown suite nope; allowed: protocol, offsets" in str(exc)
    else:
        raise AssertionError("an unknown suite was accepted")


def test_matrix_runs_real_targets_in_their_own_sessions(tmp_path: Path):
    root = tmp_path / "project"
    (root / "suites" / "protocol").mkdir(parents=True)
    (root / "suites" / "protocol" / "test_demo.py").write_text(DEMO_SUITE)
    out = tmp_path / "out"
    runs, paths = matrix.run_matrix(("reference", "librdkafka-mock"), ("protocol",), out,
                                    root=root, say=lambda _text: None)
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
    assert json.loads(Path(paths["json"]).read_text())[0]["target"] == "reference"
    assert (out / "librdkafka-mock.xml").exists()


def test_cli_rejects_an_unknown_suite_with_exit_2():
    result = subprocess.run([sys.executable, "-m", "harness.cli", "matrix", "--suites", "nope"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown suite nope" in result.stderr
