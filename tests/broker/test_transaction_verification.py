"""KIP-890 part 1's translation of the coordinator's verification answer, per requesting API
and version, as Kafka 3.9 answers its clients (the suites measure the end-to-end answers;
these pin each branch, including the versions the suites' clients do not send)."""

from __future__ import annotations

import pytest

from harness.wire.errors import ErrorCode
from reference_broker.server.transaction_verification import for_produce, for_txn_offset_commit


@pytest.mark.parametrize(("version", "expected"), [
    (10, ErrorCode.invalid_txn_state), (11, ErrorCode.transaction_abortable)])
def test_a_partition_not_added_is_refused_as_the_produce_version_knows_it(
        version: int, expected: ErrorCode) -> None:
    assert for_produce(ErrorCode.transaction_abortable, version) is expected


@pytest.mark.parametrize(("version", "expected"), [
    (3, ErrorCode.invalid_txn_state), (4, ErrorCode.transaction_abortable)])
def test_an_offsets_partition_not_added_is_refused_as_the_txn_offset_commit_version_knows_it(
        version: int, expected: ErrorCode) -> None:
    assert for_txn_offset_commit(ErrorCode.transaction_abortable, version) is expected


def test_a_fenced_epoch_is_invalid_producer_epoch_to_both() -> None:
    assert for_produce(ErrorCode.producer_fenced, 11) is ErrorCode.invalid_producer_epoch
    assert for_txn_offset_commit(ErrorCode.producer_fenced, 4) is \
        ErrorCode.invalid_producer_epoch


@pytest.mark.parametrize("error", [
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator])
def test_a_coordinator_that_cannot_answer_yet_is_an_error_the_client_retries(
        error: ErrorCode) -> None:
    assert for_produce(error, 11) is ErrorCode.not_enough_replicas
    assert for_txn_offset_commit(error, 4) is ErrorCode.coordinator_not_available


def test_other_answers_pass_through() -> None:
    assert for_produce(ErrorCode.none, 11) is ErrorCode.none
    assert for_produce(ErrorCode.invalid_producer_id_mapping, 9) is \
        ErrorCode.invalid_producer_id_mapping
    assert for_txn_offset_commit(ErrorCode.none, 2) is ErrorCode.none
