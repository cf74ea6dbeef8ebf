"""The README's and the docs' claims that code can check: the two quick-start commands, the CI
snippet (run against a broker), the API table, the versions set-up fetches, links that resolve
and no reference to files outside the repository."""

import re
from pathlib import Path

from harness.wire.protocol import api_name
from reference_broker.server.kafka_apis import registry

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def test_api_table_matches_the_handler_registry():
    broker_doc = (DOCS / "reference-broker.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|$", broker_doc, re.MULTILINE)
    table = {int(k): (name, int(lo), int(hi)) for k, name, lo, hi in rows}
    actual = {h.api_key: (api_name(h.api_key), h.min_version, h.max_version)
              for h in registry().values()}
    assert table == actual


def test_quick_start_is_exactly_two_commands_that_exist():
    block = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["bash ci/main.sh", "bash ci/test.sh"]
    for command in commands:
        assert (ROOT / command.split()[1]).is_file()
    assert "ci/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_versions_the_readme_names_are_the_ones_set_up_fetches():
    pom = (ROOT / "ci" / "apache-kafka" / "pom.xml").read_text()
    kafka = re.findall(r"<artifactId>kafka_2\.13</artifactId>\s*<version>([\d.]+)</version>", pom)
    toxiproxy = re.search(r"^TOXIPROXY_VERSION=(v[\d.]+)$",
                          (ROOT / "ci" / "fetch_vendor.sh").read_text(), re.MULTILINE)
    assert toxiproxy is not None and len(kafka) == 2
    # The versions table only: setup.md has tables of test times below it.
    section = (DOCS / "setup.md").read_text().split("| what | version | how |", 1)[1]
    section = section.split("\n\n", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (v?[\d.]+)[ |]", section, re.MULTILINE)
    named = {version for _, version in rows}
    assert named == {*kafka, toxiproxy.group(1)}


def _ci_snippet() -> dict:
    import yaml

    block = README.split("## Use it in my CI", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)


def test_the_ci_snippet_is_a_pull_request_workflow_that_installs_and_runs_the_harness():
    workflow = _ci_snippet()
    # PyYAML reads YAML 1.1, where the key `on` is the boolean true.
    assert workflow.get("on", workflow.get(True)) == ["pull_request"]
    (job,) = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs[0] == "pip install ./kafka-harness"
    assert any(step.get("with", {}).get("path") == "kafka-harness" for step in job["steps"])
    assert sum(run.startswith("kafka-harness ") for run in runs) == 1


def test_the_ci_snippets_command_passes_against_a_conforming_broker(tmp_path, users_broker):
    """The snippet's own ``kafka-harness`` line, pointed at a reference broker (the one
    address swapped, one test picked to keep it short): exit 0 and a matrix in --out."""
    import shlex
    import subprocess
    import sys

    (line,) = [step["run"] for step in next(iter(_ci_snippet()["jobs"].values()))["steps"]
               if step.get("run", "").startswith("kafka-harness ")]
    argv = [users_broker.bootstrap if word == "localhost:9092" else word
            for word in shlex.split(line)]
    assert users_broker.bootstrap in argv
    argv[argv.index("--out") + 1] = str(tmp_path / "conformance")
    run = subprocess.run([sys.executable, "-m", "harness.cli", *argv[1:], "-k",
                          "test_api_versions"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (tmp_path / "conformance" / "matrix.md").is_file()


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for doc in _markdown_files():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target:
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_nothing_refers_to_files_outside_the_repository():
    """A clone has nothing beside it: no doc, docstring or script may send a reader to
    ``../something``."""
    outside = re.compile(r"\.\./(shared|[A-Za-z_]+/[A-Z]+\.md)")
    found = []
    for path in [*_markdown_files(), *ROOT.glob("harness/**/*.py"),
                 *ROOT.glob("reference_broker/**/*.py"), *ROOT.glob("suites/**/*.py"),
                 *ROOT.glob("ci/**/*")]:
        if path.is_file() and outside.search(path.read_text(errors="replace")):
            found.append(str(path.relative_to(ROOT)))
    assert found == []
