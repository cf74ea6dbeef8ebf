"""Every API the target advertises, at every advertised version harness.wire can encode.

The test is parametrized by API (the ones ``_samples.py`` knows a safe request for: read-only,
validate-only, or acting on the test's own unique topic or group); the versions come from the
target's ApiVersions at run time, so a target is only held to what it claims. An API the target
does not advertise is skipped with that reason. Every API a target advertises must have a sample
or a stated reason why no client sends it (``test_every_advertised_api_is_covered``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.wire import protocol

from ..support import unique_name
from ._exchange import error_codes, exchange
from ._samples import NOT_SENT_BY_CLIENTS, SAMPLES, Names, Sample
from ._wire import Wire, encodable_versions


def _problems(api_key: int, version: int, frame: bytes, sample: Sample,
              correlation: int) -> list[str]:
    """What is wrong with one response frame (empty when it is sane)."""
    try:
        got, body = protocol.decode_response(api_key, version, frame)
    except Exception as exc:  # any decoding failure is the finding itself
        return [f"v{version}: undecodable response: {type(exc).__name__}: {exc}"]
    problems = []
    if got != correlation:
        problems.append(f"v{version}: correlation id {got}, sent {correlation}")
    unexpected = error_codes(body) - sample.errors
    if unexpected:
        names = sorted(protocol.error_name(code) for code in unexpected)
        problems.append(f"v{version}: unexpected errors {names}")
    throttle = getattr(body, "throttle_time", None)
    if throttle is not None and throttle.total_seconds() < 0:
        problems.append(f"v{version}: negative throttle time {throttle}")
    # Re-encoded, the decoded body must account for the whole frame: more bytes mean fields of
    # another version. Flexible versions may also carry tagged fields that kio leaves out when
    # they hold their default, so there the frame may only be longer, never shorter.
    reencoded = len(protocol.encode_response(api_key, version, got, body)) - 4
    flexible = protocol.is_flexible(api_key, version)
    if reencoded > len(frame) or (reencoded < len(frame) and not flexible):
        problems.append(f"v{version}: response is {len(frame)} bytes but its decoded content "
                        f"is {reencoded} (fields of another version?)")
    return problems


@pytest.mark.parametrize("api_key", sorted(SAMPLES), ids=protocol.api_name)
def test_advertised_versions_round_trip(request: pytest.FixtureRequest, wire: Wire,
                                        new_topic: Callable[..., str], api_key: int) -> None:
    """Every advertised version of an API is answered with a well-formed response of that version [protocol guide, ApiVersions; KIP-35].

    Each version's request is encoded at exactly that version; its response must decode at
    that version with nothing left over, echo the correlation id, and carry only the error
    codes a valid request of this kind may get.
    """  # noqa: E501
    sample = SAMPLES[api_key]
    versions = [v for v in encodable_versions(wire.advertised, api_key)
                if sample.client_max_version is None or v <= sample.client_max_version]
    if not versions:
        pytest.skip(f"{protocol.api_name(api_key)} is not advertised at any version harness.wire"
                    f" encodes (advertised: {wire.advertised.get(api_key)})")
    topic = new_topic(1, exact=False)
    topic_id = wire.topic_id(topic)
    group, unused = unique_name(request, "group-"), unique_name(request, "unused-")
    problems = []
    for version in versions:
        names = Names(topic, topic_id, group, f"{unused}-v{version}")
        try:
            correlation, frame = exchange(wire, api_key, version, sample, names)
        except (ConnectionError, TimeoutError) as exc:
            problems.append(f"v{version}: no answer ({type(exc).__name__}: {exc})")
            break
        problems += _problems(api_key, version, frame, sample, correlation)
    assert not problems, "\n".join(problems)


def test_every_advertised_api_is_covered(wire: Wire) -> None:
    """Every API a broker advertises is one a client may send, so each has a safe request here, or a stated reason why no client sends it [protocol guide, ApiVersions; KIP-35].

    APIs that harness.wire has no schema for (newer than the Kafka release its kio was built
    from) cannot be sent at all and are left out.
    """  # noqa: E501
    advertised = set(wire.advertised)
    uncovered = sorted(k for k in advertised - SAMPLES.keys() - NOT_SENT_BY_CLIENTS.keys()
                       if encodable_versions(wire.advertised, k))
    assert not uncovered, ("advertised APIs with neither a safe request in _samples.py nor a "
                           f"reason: {[protocol.api_name(k) for k in uncovered]}")


INCONSISTENT_GROUP_PROTOCOL = 23
SYNC_GROUP = 14


def test_sync_group_v5_without_protocol_type_or_name_is_inconsistent(
        request: pytest.FixtureRequest, wire: Wire) -> None:
    """A SyncGroup v5+ whose protocol type or name is null is refused with INCONSISTENT_GROUP_PROTOCOL [KIP-559].

    From v5 both fields are mandatory; Apache Kafka 3.9 answers a null one before it looks at the
    group or the member at all.
    """  # noqa: E501
    if max(encodable_versions(wire.advertised, SYNC_GROUP), default=-1) < 5:
        pytest.skip("the target advertises no SyncGroup v5 harness.wire can encode")
    group = unique_name(request, "group-")
    client = wire.coordinator(group)
    for missing in ("protocol_type", "protocol_name"):
        body: dict[str, Any] = {
            "group_id": group, "generation_id": 1, "member_id": "harness-unknown-member",
            "assignments": [], "protocol_type": "consumer", "protocol_name": "range",
            missing: None}
        answer = client.request(SYNC_GROUP, 5, body)
        assert answer.error_code.value == INCONSISTENT_GROUP_PROTOCOL, (missing, answer)
