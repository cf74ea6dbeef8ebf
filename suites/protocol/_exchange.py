"""Sending a sample request as a client would: to the broker its route names, again after a
retriable answer (a coordinator still loading, a leader that moved) once the broker is found
again. The round-trip suite and the differential test (reference broker vs Apache Kafka) share
it, so both see the answer a client would settle on."""

from __future__ import annotations

import time
from dataclasses import fields, is_dataclass
from typing import Any

from harness.raw_client import RawClient
from harness.wire import protocol

from ._samples import Names, Route, Sample
from ._wire import TRANSACTION_KEY, Wire

RETRY_S = 30.0
# Answers a client retries after finding the coordinator or leader again [protocol guide,
# error codes: retriable]: not yet elected, still loading, or moved — or, for the samples' topic,
# which exists (every broker's Metadata lists it before a test sends anything), not yet known
# to the component that answers: Apache Kafka 4.4's group coordinator reads topics from its own
# metadata image, which can trail the broker's Metadata answer, and answered one
# AlterShareGroupOffsets UNKNOWN_TOPIC_OR_PARTITION (matrix of 2026-11-26, 08:10).
RETRIABLE = frozenset(
    int(protocol.error_code(name).value) for name in
    ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
     "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION"))


# Where a response carries an error code: AddPartitionsToTxn names its per-partition one
# `partition_error_code`.
_ERROR_FIELDS = frozenset({"error_code", "partition_error_code"})


def route(wire: Wire, sample: Sample, names: Names) -> RawClient:
    """A connection to the broker that answers ``sample`` (after finding the one a client
    finds first, if any)."""
    if sample.found_first is not None:
        connect(wire, sample.found_first, names)
    return connect(wire, sample.route, names)


def connect(wire: Wire, where: Route, names: Names) -> RawClient:
    match where:
        case Route.LEADER:
            return wire.leader(names.topic)
        case Route.GROUP_COORDINATOR:
            return wire.coordinator(names.group)
        case Route.TRANSACTION_COORDINATOR:
            return wire.coordinator(names.transactional_id, TRANSACTION_KEY)
        case Route.CONTROLLER:
            return wire.controller()
    return wire.bootstrap


def error_codes(value: Any) -> set[int]:
    """Every error code anywhere in a decoded response (top level and per item)."""
    found: set[int] = set()
    if is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            item = getattr(value, f.name)
            if f.name in _ERROR_FIELDS:
                found.add(int(item.value))
            found |= error_codes(item)
    elif isinstance(value, tuple):
        for item in value:
            found |= error_codes(item)
    return found


def exchange(wire: Wire, api_key: int, version: int, sample: Sample,
             names: Names) -> tuple[int, bytes]:
    """(correlation id, response frame) of ``sample`` at ``version``; ConnectionError or
    TimeoutError when the broker does not answer."""
    deadline = time.monotonic() + RETRY_S
    while True:
        client = route(wire, sample, names)
        correlation = client.send(api_key, version, sample.body(names))
        frame = client.receive_frame()
        if not must_retry(api_key, version, frame, sample) or time.monotonic() > deadline:
            return correlation, frame
        time.sleep(0.2)


def must_retry(api_key: int, version: int, frame: bytes, sample: Sample) -> bool:
    """Whether the answer carries a retriable error (:data:`RETRIABLE`) the sample does not
    expect: then, as a client does, find the broker again and resend."""
    try:
        _, body = protocol.decode_response(api_key, version, frame)
    except Exception:  # undecodable: the caller reports it
        return False
    return bool((error_codes(body) & RETRIABLE) - sample.errors)
