"""server.properties parsing, validation and the broker process's exit codes."""

import subprocess
import sys

import pytest

from reference_broker.config import ConfigError, KafkaConfig, parse_properties


def test_properties_syntax():
    text = "# comment\n! also comment\nbroker.id = 3\nlog.dirs: /a,/b\nlisteners=PLAINTEXT://h:1\\\n2\n"
    props = parse_properties(text)
    assert props == {"broker.id": "3", "log.dirs": "/a,/b", "listeners": "PLAINTEXT://h:12"}


def test_defaults_and_precedence():
    config = KafkaConfig({"log.retention.hours": "2", "log.retention.minutes": "30"})
    assert config.retention_ms == 30 * 60_000
    assert KafkaConfig({"log.retention.ms": "-1"}).retention_ms == -1
    assert KafkaConfig({}).retention_ms == 168 * 3_600_000
    assert KafkaConfig({}).advertised_listeners == KafkaConfig({}).listeners


@pytest.mark.parametrize("key,value", [
    ("broker.id", "-4"), ("num.partitions", "zero"), ("listeners", "localhost:9092"),
    ("log.message.timestamp.type", "Wallclock"), ("auto.create.topics.enable", "yes"),
    ("log.segment.bytes", "10"),
])
def test_invalid_values_name_key_value_and_allowed(key, value):
    with pytest.raises(ConfigError) as info:
        KafkaConfig({key: value})
    message = str(info.value)
    assert key in message and repr(value) in message and info.value.allowed in message


def _run(tmp_path, text):
    path = tmp_path / "server.properties"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "reference_broker", str(path)],
                          capture_output=True, text=True, timeout=30)


def test_invalid_value_exits_2_with_one_line(tmp_path):
    result = _run(tmp_path, "broker.id=0\nnum.partitions=-1\n")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["Invalid value '-1' for configuration num.partitions: an integer >= 1"]


def test_unknown_key_warns_by_name(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                    "no.such.setting=1\n")
    with subprocess.Popen([sys.executable, "-m", "reference_broker", str(path)],
                          stderr=subprocess.PIPE, text=True) as process:
        try:
            seen = []
            for line in process.stderr:
                seen.append(line)
                if "started" in line:
                    break
            assert any("Unknown configuration key no.such.setting" in line for line in seen)
        finally:
            process.terminate()
            process.wait(10)
    assert process.returncode == 0


def test_missing_config_file_exits_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "reference_broker",
                             str(tmp_path / "absent.properties")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_second_broker_on_the_same_log_dir_fails_clearly(broker):
    result = subprocess.run(
        [sys.executable, "-m", "reference_broker", str(broker.properties_path),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "lock" in result.stderr.lower()
