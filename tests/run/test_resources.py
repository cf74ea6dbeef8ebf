"""The soak's judgement of resource growth (harness/run/resources.py): pure over samples, and the
sampler reading real processes from /proc."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.run.resources import ResourceSampler, Sample, judge, read_process
from harness.waiting import wait_for

MIB = 2**20


def _life(node: str, pid: int, points: list[tuple[float, int, int]]) -> list[Sample]:
    return [Sample(at, node, pid, rss * MIB, files) for at, rss, files in points]


def test_a_life_that_grows_past_the_limit_after_warm_up_fails_the_soak():
    samples = _life("broker-1", 10, [(0, 50, 20), (60, 300, 80), (120, 310, 80),
                                     (180, 320, 81), (240, 360, 82)])
    judged = judge(samples, warmup_s=100)
    (life,) = judged.lives
    # The climb before warm-up (50 -> 300 MiB) is not growth; 310 -> 360 MiB is 16 %.
    assert life.judged_from_s == 120 and life.rss_bytes == (310 * MIB, 360 * MIB)
    assert life.rss_growth == pytest.approx(50 / 310)
    assert life.files_growth == pytest.approx(2 / 80)
    assert judged.grown == (life,) and not judged.passed


def test_open_files_alone_can_fail_it():
    samples = _life("harness", 1, [(0, 100, 10), (60, 100, 10), (120, 100, 12)])
    judged = judge(samples, warmup_s=60)
    assert judged.lives[0].files_growth == pytest.approx(0.2) and not judged.passed


def test_a_restart_starts_a_new_life_and_neither_drop_nor_climb_counts():
    before = _life("broker-2", 20, [(0, 40, 30), (60, 200, 30), (120, 202, 30)])
    after = _life("broker-2", 21, [(180, 40, 25), (240, 190, 30), (300, 195, 30),
                                   (360, 199, 30)])
    judged = judge(before + after, warmup_s=60)
    assert [(life.pid, life.judged_from_s) for life in judged.lives] == [(20, 60), (21, 240)]
    assert judged.lives[1].rss_growth == pytest.approx(9 / 190)
    assert judged.passed


def test_lives_too_short_to_judge_are_not_a_pass():
    samples = _life("broker-1", 30, [(0, 100, 10), (60, 900, 99)])
    judged = judge(samples, warmup_s=60)
    assert not judged.lives[0].judged and judged.lives[0].rss_growth is None
    assert judged.grown == () and not judged.passed  # nothing judged is no evidence


def test_a_life_is_judged_only_over_the_span_asked_for():
    samples = _life("broker-3", 40, [(0, 100, 10), (200, 100, 10), (260, 140, 10),
                                     (500, 141, 10)])
    short = judge(samples[:3], warmup_s=180, min_span_s=300)
    assert not short.lives[0].judged and not short.passed  # 200 -> 260 s: a minute
    long = judge(samples, warmup_s=180, min_span_s=300)
    assert long.lives[0].judged_from_s == 200 and long.grown == long.lives


def test_the_sampler_reads_a_real_process_until_it_is_gone():
    # A child that opens one more file each time it reads a line, so the count is ours to set.
    with subprocess.Popen(
            [sys.executable, "-c",
             "import sys\nkept = []\nprint('ready', flush=True)\nfor _ in sys.stdin:\n"
             "    kept.append(open('/dev/null'))\n    print(len(kept), flush=True)\n"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdin is not None and child.stdout is not None
            assert child.stdout.readline() == "ready\n"  # exec'd and running our code
            rss, files_before = read_process(child.pid) or (0, 0)
            assert rss > MIB
            for _ in range(5):
                child.stdin.write("open\n")
                child.stdin.flush()
                child.stdout.readline()
            assert (read_process(child.pid) or (0, 0))[1] == files_before + 5

            sampler = ResourceSampler(lambda: {"child": child.pid, "down": None},
                                      interval_s=0.05).start()
            wait_for(lambda: len(sampler.samples) >= 3, 10, "three samples of the child")
            samples = sampler.stop()
            child.stdin.close()
            child.wait(10)
            sampler.sample_now()  # the child is gone: nothing more is sampled
        finally:
            child.kill()  # the with-block then closes the pipes and reaps it
    assert {s.node for s in samples} == {"child"}
    assert all(s.pid == child.pid and s.open_files == files_before + 5 for s in samples)
    assert read_process(child.pid) is None and sampler.samples == samples


def test_the_sampler_refuses_a_silly_interval():
    with pytest.raises(ValueError, match="interval"):
        ResourceSampler(dict, interval_s=0)
