"""ApiVersions: what the target advertises, at each version it speaks; the KIP-511 downgrade."""

from __future__ import annotations

import struct

import pytest

from harness.wire import protocol

from ._wire import API_VERSIONS, API_VERSIONS_BODY, Wire, advertised_versions

UNSUPPORTED_VERSION = 35


def test_every_api_versions_version_advertises_the_same_ranges(wire: Wire) -> None:
    """ApiVersions is answered at every version the broker lists, with the same ranges [protocol guide, ApiVersions; KIP-35].

    A client negotiates with whatever ApiVersions version it speaks, so the answer may not depend
    on it; every range must be well formed, each API listed once, and ApiVersions itself must be
    supported from v0 (the version every client can fall back to).
    """  # noqa: E501
    low, high = wire.advertised[API_VERSIONS]
    assert low == 0, f"ApiVersions must be supported from v0, advertised {low}..{high}"
    for version in range(0, min(high, protocol.modelled_versions(API_VERSIONS)[-1]) + 1):
        response = wire.bootstrap.request(API_VERSIONS, version, API_VERSIONS_BODY)
        assert response.error_code.value == 0, f"v{version}: {response.error_code}"
        keys = [k.api_key for k in response.api_keys]
        assert len(keys) == len(set(keys)), f"v{version} lists an API twice: {sorted(keys)}"
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges == wire.advertised, f"v{version} advertises different ranges"
        assert all(0 <= lo <= hi for lo, hi in ranges.values()), ranges


def test_every_broker_advertises_api_versions(wire: Wire) -> None:
    """Every broker a client is pointed at by Metadata answers ApiVersions [protocol guide, ApiVersions; KIP-35]."""  # noqa: E501
    brokers = wire.metadata().brokers
    assert brokers, "Metadata lists no brokers"
    for broker in brokers:
        client = wire.connect(f"{broker.host}:{broker.port}")
        ranges = advertised_versions(client)
        assert API_VERSIONS in ranges and ranges[API_VERSIONS][0] == 0, (broker.node_id, ranges)


def _api_versions_frame(version: int, correlation_id: int) -> bytes:
    """An ApiVersions request at `version` with a v3-style body, as a newer client sends it.

    kio only encodes the versions it models, so the frame of the highest flexible version is
    encoded and its header's version field (bytes 6-7 after the size prefix) rewritten.
    """
    template = protocol.modelled_versions(API_VERSIONS)[-1]
    frame = bytearray(protocol.encode_request(
        api_key=API_VERSIONS, api_version=template, correlation_id=correlation_id,
        client_id="kafka-harness-suites", body=API_VERSIONS_BODY))
    struct.pack_into(">h", frame, 6, version)
    return bytes(frame)


def test_unsupported_api_versions_version_gets_v0_answer_with_ranges(wire: Wire) -> None:
    """An ApiVersions request above the broker's range is answered UNSUPPORTED_VERSION with its ranges in a v0 response [KIP-511].

    The client then retries at the highest version listed for ApiVersions; the connection
    stays open for that retry.
    """  # noqa: E501
    too_new = wire.advertised[API_VERSIONS][1] + 1
    client = wire.connect()
    client.send_raw(_api_versions_frame(too_new, correlation_id=4242))
    frame = client.receive_frame()
    try:
        correlation, body = protocol.decode_response(API_VERSIONS, 0, frame)
    except Exception as exc:  # kio's assorted decoding errors: the answer is not v0
        pytest.fail(f"the answer to ApiVersions v{too_new} is not a v0 response "
                    f"({type(exc).__name__}); frame starts {frame[:24].hex()}")
    assert correlation == 4242
    assert body.error_code.value == UNSUPPORTED_VERSION, body.error_code
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert API_VERSIONS in ranges, f"the v0 answer lists no ApiVersions range: {ranges}"
    assert ranges[API_VERSIONS][1] < too_new
    retry = ranges[API_VERSIONS][1]
    if retry in protocol.modelled_versions(API_VERSIONS):
        assert advertised_versions(client, retry) == wire.advertised
