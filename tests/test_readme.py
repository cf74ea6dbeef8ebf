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
