"""ci/fetch_vendor.sh: a second run only checks; a failed fetch names what could not be fetched,
says how to retry, and leaves nothing half-fetched that a later run could take for complete."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness.vendor import vendor_dir

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "ci" / "fetch_vendor.sh"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def test_a_second_run_only_checks():
    """Set-up has fetched everything already (CI runs it first): nothing is fetched again."""
    result = _run({})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    for part in ("kafka-3.9/.complete", "kafka-4/.complete", "bin/toxiproxy-server"):
        assert (vendor_dir() / part).exists(), part


def _failing_tool(bin_dir: Path, name: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\necho 'the registry refused the request' >&2\nexit 1\n")
    tool.chmod(0o755)


def test_a_failed_kafka_fetch_names_it_and_leaves_nothing_behind(tmp_path):
    _failing_tool(tmp_path / "bin", "mvn")
    vendor = tmp_path / "vendor"
    result = _run({"KAFKA_HARNESS_VENDOR": str(vendor),
                   "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("setup: could not fetch Apache Kafka 3.9.2 "
                               "(org.apache.kafka:kafka_2.13:3.9.2 and its dependencies)")
    assert "retry with: bash ci/fetch_vendor.sh" in lines[0]
    assert sorted(p.name for p in vendor.iterdir()) == ["kafka-3.9.failed.log"]
    assert "the registry refused" in (vendor / "kafka-3.9.failed.log").read_text()


def test_a_failed_toxiproxy_build_names_it_and_leaves_nothing_behind(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for line in ("kafka-3.9", "kafka-4"):  # the jars are there: only the build is tried
        shutil.copytree(vendor_dir() / line, vendor / line, symlinks=True)
    _failing_tool(tmp_path / "bin", "go")
    result = _run({"KAFKA_HARNESS_VENDOR": str(vendor),
                   "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert result.returncode == 3
    assert result.stderr.startswith("setup: could not fetch Toxiproxy v2.12.0 "
                                     "(github.com/Shopify/toxiproxy/v2/cmd/server)")
    assert not (vendor / "bin" / "toxiproxy-server").exists()
    assert not (vendor / ".toxiproxy.partial").exists()
