"""A parked Fetch is woken by every append that gives it data, including one the broker reads in
the same event-loop turn as the Fetch itself.

The broker reads a Fetch at once and, short of ``min_bytes``, parks it as a task that runs from
the next turn of the loop. An append handled between that read and the task's first step used
to wake nobody (the task had not yet said what it waits for), and the Fetch then slept until
``max_wait``: CI saw "the parked Fetch was not answered within 10 s of the append" under load.
Kafka's ``DelayedOperationPurgatory.tryCompleteElseWatch`` checks again after it starts watching
for the same reason; the reference broker starts watching before the read's answer is returned.

Pausing the broker (SIGSTOP) while both requests are sent makes the race certain: when it runs
again, both sockets are readable in one turn, the Fetch's first.
"""

import os
import signal
import time

from harness.raw_client import RawClient
from harness.wire.records import build_batch, iter_headers
from suites.protocol._wire import fetch_body, produce_body

from .conftest import create_topic

PRODUCE, FETCH = 0, 1
PARKED_MS = 30_000


def test_an_append_read_in_the_same_loop_turn_as_the_fetch_wakes_it(broker):
    topic = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as reader, \
            RawClient(broker.host, broker.port) as writer:
        empty = reader.request(FETCH, 11, fetch_body(topic, 0)).responses[0].partitions[0]
        assert empty.error_code == 0 and empty.high_watermark == 0, empty
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            parked = reader.send(FETCH, 11, fetch_body(topic, 0, max_wait=PARKED_MS))
            time.sleep(0.1)  # the Fetch's bytes reach the broker's socket first
            writer.send(PRODUCE, 9, produce_body(topic, build_batch([(None, b"wake")]), acks=1))
            time.sleep(0.1)
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        _, produced = writer.receive(PRODUCE, 9)
        assert produced.responses[0].partition_responses[0].error_code == 0
        reader._sock.settimeout(5.0)
        started = time.monotonic()
        try:
            correlation, answer = reader.receive(FETCH, 11)
        except TimeoutError:
            raise AssertionError("the parked Fetch slept through the append read in its own "
                                 f"loop turn (still parked after 5 s of {PARKED_MS} ms)") from None
        assert correlation == parked
        assert time.monotonic() - started < 5.0
        woken = answer.responses[0].partitions[0]
        assert woken.error_code == 0 and woken.high_watermark == 1, woken
        assert [h.records_count for h in iter_headers(woken.records)] == [1]
