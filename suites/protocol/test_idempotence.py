"""Idempotent producer: the leader deduplicates retries and refuses sequence gaps (KIP-98)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.wire.records import build_batch

from ._wire import Wire

DUPLICATE_SEQUENCE_NUMBER, OUT_OF_ORDER_SEQUENCE_NUMBER = 46, 45


def _batch(pid: int, epoch: int, sequence: int, payload: list[bytes]) -> bytes:
    return build_batch([(None, value) for value in payload], producer_id=pid,
                       producer_epoch=epoch, base_sequence=sequence)


def _assert_deduplicated(answer: Any, original_offset: int) -> None:
    """A retry is answered as a success at the original offset (Kafka 1.0+), or — as brokers
    before KIP-98's follow-ups did — DUPLICATE_SEQUENCE_NUMBER; never appended again."""
    code = answer.error_code.value
    assert code in (0, DUPLICATE_SEQUENCE_NUMBER), answer
    if code == 0:
        assert answer.base_offset == original_offset, answer


def test_resent_batch_is_not_appended_twice(wire: Wire, new_topic: Callable[..., str]) -> None:
    """A batch resent with the same producer id, epoch and sequence is not appended again [KIP-98; protocol guide, Produce].

    Both the latest batch and an older one still within the last five are retried; the log
    holds each record exactly once.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    pid, epoch = wire.init_producer_id()
    first = wire.produce(topic, _batch(pid, epoch, 0, [b"a", b"b"]))
    assert (first.error_code.value, first.base_offset) == (0, 0), first
    second = wire.produce(topic, _batch(pid, epoch, 2, [b"c"]))
    assert (second.error_code.value, second.base_offset) == (0, 2), second
    _assert_deduplicated(wire.produce(topic, _batch(pid, epoch, 2, [b"c"])), 2)
    _assert_deduplicated(wire.produce(topic, _batch(pid, epoch, 0, [b"a", b"b"])), 0)
    third = wire.produce(topic, _batch(pid, epoch, 3, [b"d"]))
    assert (third.error_code.value, third.base_offset) == (0, 3), third
    assert [r.value for r in wire.read_log(topic, 4)] == [b"a", b"b", b"c", b"d"]
    assert wire.list_offset(topic, -1).offset == 4, "a retried batch was appended again"


def test_sequence_gap_is_out_of_order(wire: Wire, new_topic: Callable[..., str]) -> None:
    """A batch whose sequence skips ahead of the next expected one is refused with OUT_OF_ORDER_SEQUENCE_NUMBER [KIP-98; protocol guide, Produce].

    Nothing of the refused batch is appended, and the expected sequence still succeeds after.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    pid, epoch = wire.init_producer_id()
    assert wire.produce(topic, _batch(pid, epoch, 0, [b"a"])).error_code.value == 0
    gap = wire.produce(topic, _batch(pid, epoch, 5, [b"skipped-ahead"]))
    assert gap.error_code.value == OUT_OF_ORDER_SEQUENCE_NUMBER, gap
    next_ok = wire.produce(topic, _batch(pid, epoch, 1, [b"b"]))
    assert (next_ok.error_code.value, next_ok.base_offset) == (0, 1), next_ok
    assert [r.value for r in wire.read_log(topic, 2)] == [b"a", b"b"]
    assert wire.list_offset(topic, -1).offset == 2, "the out-of-order batch was appended"
