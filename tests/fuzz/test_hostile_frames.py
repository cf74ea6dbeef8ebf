"""ci/hostile_frames.py: the same seeded hostile frames over sockets to the reference broker and
Apache Kafka, judged by harness.conformance.hostile's rules."""

from __future__ import annotations

import json
import struct

import hostile_frames
import pytest

from harness.conformance import hostile


def test_the_frames_are_a_function_of_the_seed_and_cover_every_fate():
    originals = hostile_frames.originals()
    first = list(hostile.frames(3, 600, originals))
    assert first == list(hostile.frames(3, 600, originals))
    assert first != list(hostile.frames(4, 600, originals))
    fates = {hostile.fate(frame) for frame in first}
    assert fates == set(hostile.Fate)


def test_the_originals_are_real_client_frames_of_harmless_apis_only():
    originals = hostile_frames.originals()
    api_keys = {struct.unpack_from(">h", frame, 4)[0] for frame in originals}
    # ApiVersions, Metadata and Produce from both clients are there; CreateTopics (19),
    # DeleteTopics (20), Fetch (1) and JoinGroup (11) are not.
    assert {0, 3, 18} <= api_keys and not api_keys & {1, 11, 19, 20}
    for frame in originals:
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


def test_bad_options_exit_2(capsys):
    with pytest.raises(SystemExit) as exited:
        hostile_frames.main(["--frames", "0"])
    assert exited.value.code == 2 and "--frames" in capsys.readouterr().err


@pytest.mark.slow
def test_both_brokers_keep_serving_through_the_same_frames(tmp_path):
    out = tmp_path / "hostile.json"
    code = hostile_frames.main(["--frames", "300", "--run-dir", str(tmp_path / "runs"),
                                "--json-out", str(out)])
    results = {r["kind"]: r for r in json.loads(out.read_text())["results"]}
    assert code == 0, results
    assert set(results) == {"reference", "apache-kafka"}
    for result in results.values():
        assert result["frames_sent"] == result["witness_answers"] == 300
        assert result["broker_restarts"] == 0 and result["fresh_client_ok"]
        assert result["outcomes"]["closed"] > 100  # most size prefixes are out of range
