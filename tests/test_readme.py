"""The README's claims that code can check: the API table and the two quick-start commands."""

import re
from pathlib import Path

from harness.wire.protocol import api_name
from reference_broker.server.kafka_apis import registry

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_api_table_matches_the_handler_registry():
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|$", README, re.MULTILINE)
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
    section = README.split("## Apache Kafka and the real Toxiproxy", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (v?[\d.]+)[ |]", section, re.MULTILINE)
    named = {version for _, version in rows}
    assert named == {*kafka, toxiproxy.group(1)}
