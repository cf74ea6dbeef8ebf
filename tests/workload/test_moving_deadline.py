"""The run's end as a client sees it (harness/workload/context.py): a file the runner rewrites,
reread at most every REREAD_S, and cheap enough for a producer's send loop."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import pytest

from harness.waiting import wait_for
from harness.workload import client
from harness.workload.context import REREAD_S, RunContext, read_end, write_end
from harness.workload.generator import Generator
from harness.workload.producer import ProducerSpec


def _context(tmp_path, end_s: float, *, with_file: bool = True) -> RunContext:
    end_file = tmp_path / "workload-end"
    if with_file:
        write_end(end_file, int(end_s * 1e9))
    return RunContext(str(tmp_path / "history"), "run-d", 1, time.monotonic_ns(),
                      int(end_s * 1e9), str(end_file) if with_file else None)


def test_a_client_sees_the_end_moved_after_it_started(tmp_path):
    context = _context(tmp_path, 0.5)
    assert 0 < context.remaining_s() <= 0.5
    write_end(context.end_file, int(30e9))  # the runner extends the run
    # Within one reread period the client's remaining time jumps to the new end.
    wait_for(lambda: context.remaining_s() > 25, 2 * REREAD_S + 1, "the extension seen")
    write_end(context.end_file, 0)  # and an end moved back is seen too
    wait_for(lambda: context.remaining_s() < 0, 2 * REREAD_S + 1, "the end moved back")


def test_the_end_travels_to_the_client_process_with_its_file(tmp_path):
    context = _context(tmp_path, 7)
    argv = client.command("producer", ProducerSpec("127.0.0.1:1", ("t",)),
                          context.with_process(4))
    sent = json.loads(argv[-1])["context"]
    assert sent == {**asdict(context), "process": 4}  # plain data: no cache in the JSON
    received = RunContext(**sent)
    write_end(context.end_file, int(60e9))
    wait_for(lambda: received.remaining_s() > 50, 2 * REREAD_S + 1, "the extension seen")


def test_without_a_readable_file_the_command_line_end_holds(tmp_path):
    assert _context(tmp_path, 5, with_file=False).current_end_ns() == int(5e9)
    context = _context(tmp_path, 5)
    (tmp_path / "workload-end").unlink()
    assert read_end(context.end_file) is None
    assert context.current_end_ns() == int(5e9)
    (tmp_path / "workload-end").write_text("not a number")
    assert read_end(context.end_file) is None


def test_the_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "workload-end"
    for end in range(200):
        write_end(path, end)
        assert read_end(path) == end
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workload-end"]


def test_asking_in_a_hot_loop_costs_about_what_a_fixed_end_costs(tmp_path):
    """A producer asks remaining_s() on every send: with the cache, 100 000 asks cost a few
    file reads, not 100 000 of them."""
    fixed, moving = _context(tmp_path, 60, with_file=False), _context(tmp_path, 60)

    def cost(context: RunContext) -> float:
        started = time.perf_counter()
        for _ in range(100_000):
            context.remaining_s()
        return time.perf_counter() - started

    fixed_s, moving_s = cost(fixed), cost(moving)
    # A file read per ask costs ~50 µs on this loaded machine (5 s in all); the cache keeps
    # it within a small factor of the fixed end's arithmetic.
    assert moving_s < max(4 * fixed_s, 0.25), (fixed_s, moving_s)


@pytest.mark.parametrize("end_s", [0.0, -1.0])
def test_an_end_in_the_past_means_no_time_left(tmp_path, end_s):
    assert _context(tmp_path, end_s).remaining_s() <= 0


def test_the_generator_replaces_a_dead_client_only_while_the_moved_end_leaves_it_time(tmp_path):
    """The replacement rule reads the same end: a client killed while the end is a minute away
    is replaced; once the runner has moved the end to under a second away, it is not."""
    context = _context(tmp_path, 60)
    spec = ProducerSpec("127.0.0.1:1", ("t",), rate=1.0)  # nothing listens: it only waits
    generator = Generator([("producer", spec)], context, tmp_path / "logs")
    try:
        generator.start()
        generator.kill(1)
        (ended,) = wait_for(lambda: generator.check(), 30, "the killed client collected")
        assert ended.replaced_by == 2 and list(generator.running) == [2]

        now_ns = time.monotonic_ns() - context.run_start_ns
        write_end(context.end_file, now_ns + int(0.8e9))
        wait_for(lambda: context.remaining_s() < 1, 2 * REREAD_S + 1, "the end moved closer")
        generator.kill(2)
        (ended,) = wait_for(lambda: generator.check(), 30, "the killed client collected")
        assert ended.replaced_by is None and generator.running == {}
    finally:
        generator.stop()


def test_a_running_client_process_stops_at_an_end_moved_closer(tmp_path):
    context = _context(tmp_path, 120)
    spec = ProducerSpec("127.0.0.1:1", ("t",), rate=5.0)
    generator = Generator([("producer", spec)], context, tmp_path / "logs")
    try:
        generator.start()
        write_end(context.end_file, time.monotonic_ns() - context.run_start_ns)
        (ended,) = wait_for(lambda: generator.check(), 60, "the client's own exit")
        assert ended.returncode == 0 and ended.replaced_by is None
    finally:
        generator.stop()
