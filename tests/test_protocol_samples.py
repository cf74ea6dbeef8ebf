"""The protocol suite's safe requests are well-formed for every version harness.wire models.

Most APIs are only sent where a target advertises them — some by no broker CI runs — so a
misspelt key would otherwise surface only on someone else's broker. ``protocol.build`` refuses
keys of no version; every sample is built here at every version, without a broker.
"""

from __future__ import annotations

import uuid

import pytest

from harness.wire import protocol
from suites.protocol._samples import NOT_SENT_BY_CLIENTS, SAMPLES, Names

NAMES = Names("topic", uuid.uuid4(), "group", "fresh")


@pytest.mark.parametrize("api_key", sorted(SAMPLES), ids=protocol.api_name)
def test_every_sample_encodes_at_every_modelled_version(api_key: int) -> None:
    sample = SAMPLES[api_key]
    versions = [v for v in protocol.modelled_versions(api_key)
                if sample.client_max_version is None or v <= sample.client_max_version]
    assert versions, f"harness.wire models no version of {protocol.api_name(api_key)}"
    for version in versions:
        frame = protocol.encode_request(api_key=api_key, api_version=version, correlation_id=1,
                                        client_id="samples", body=sample.body(NAMES))
        assert len(frame) > 4


def test_an_api_has_a_sample_or_a_reason_never_both() -> None:
    assert not SAMPLES.keys() & NOT_SENT_BY_CLIENTS.keys()
    assert all(reason.strip() for reason in NOT_SENT_BY_CLIENTS.values())
