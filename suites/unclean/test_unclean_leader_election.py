"""unclean.leader.election.enable off, on, and turned on at runtime, and KIP-966's eligible
leader replicas, judged on one scenario.

The scenario (:mod:`suites.unclean.scenario`) stops the only in-sync replica of four topics
while an out-of-sync replica lives, and records everything in a harness history. The verdict on
what was lost is the checker's: ``lost_write`` must list exactly the records the ISR
acknowledged while the out-of-sync replica was away (the records written after its election
take their offsets, which makes them ``lost_write`` rather than ``unseen``, and
``inconsistent_offset`` at the same offsets) — and nothing for the topic that kept it off.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.cluster.targets import Target

from .scenario import (
    AFTER,
    BEFORE,
    ELR,
    FLIP,
    OFF,
    ON,
    Outcome,
    TopicStory,
)

pytestmark = [pytest.mark.requires_process_faults, pytest.mark.requires_faults,
              pytest.mark.requires_controller, pytest.mark.requires_multi_broker,
              pytest.mark.requires_create_topics]


def _clean_candidates(state: dict[str, Any]) -> list[int]:
    """The replicas that may still lead without loss: the ISR — or, once the ISR is empty, the
    eligible leader replicas (KIP-966): Kafka 4.x in KRaft mode empties the ISR when its last
    member stops and keeps that member in the ELR, where ZooKeeper mode keeps it in the ISR."""
    return list(state["isr"] or state.get("elr", []))


def _has_elr(story: TopicStory) -> bool:
    return story.alone is not None and "elr" in story.alone


def _assert_offline_and_refusing(outcome: Outcome, story: TopicStory) -> None:
    assert story.alone is not None and story.alone["leader"] == -1, \
        f"{story.topic}-0 with its ISR dead: {story.alone}"
    assert _clean_candidates(story.alone) == [outcome.in_sync], story.alone
    assert story.refused is not None and story.refused.type != "ok", \
        f"a send to an offline partition was acknowledged: {story.refused}"


def _assert_exactly_the_unreplicated_lost(outcome: Outcome, story: TopicStory) -> None:
    """The out-of-sync replica leads alone, new writes reuse the lost offsets, and the checker
    lists exactly the records it never had as lost and overwritten — nothing else."""
    assert story.elected is not None and story.elected["leader"] == outcome.out_of_sync, \
        f"{story.topic}-0 after the election: {story.elected}"
    assert story.elected["isr"] == [outcome.out_of_sync]
    assert [(e.type, e.offset) for e in story.after] == \
        [("ok", offset) for offset in range(BEFORE, BEFORE + AFTER)], \
        "records written after the unclean election did not reuse the lost offsets"
    assert story.read_complete

    expected = sorted((e.offset, e.value) for e in story.unreplicated)
    found = outcome.anomalies_of(story.topic)
    verdict = f"checker on {outcome.history_dir}: {found}"
    assert sorted(found) == ["inconsistent_offset", "lost_write"], verdict
    assert sorted((x["offset"], x["value"]) for x in found["lost_write"]) == expected, verdict
    assert sorted(x["offset"] for x in found["inconsistent_offset"]) == \
        [offset for offset, _ in expected], verdict


def test_disabled_keeps_the_partition_offline_and_loses_nothing_acked(
        kafka_target: Target, unclean_outcome: Outcome) -> None:
    """Unclean election off: with the ISR dead the partition stays offline, no acked loss [KIP-106].

    With unclean.leader.election.enable=false the partition has leader -1 while an out-of-sync
    replica is alive, refuses writes, and once the ISR replica returns it leads with every
    acknowledged record (the checker finds no anomaly on the topic)."""
    outcome = unclean_outcome
    story = outcome.stories[OFF]
    _assert_offline_and_refusing(outcome, story)
    assert story.before_return is not None and story.before_return["leader"] == -1, \
        f"{story.topic}-0 did not stay offline: {story.before_return}"
    assert story.returned is not None and story.returned["leader"] == outcome.in_sync, \
        f"{story.topic}-0 once ISR replica {outcome.in_sync} returned: {story.returned}"
    assert story.read_complete
    found = outcome.anomalies_of(story.topic)
    assert not found, f"checker on {outcome.history_dir}: {found}"


def test_enabled_elects_the_out_of_sync_replica_and_loses_exactly_what_it_never_had(
        kafka_target: Target, unclean_outcome: Outcome) -> None:
    """Unclean election on: the out-of-sync replica leads, losing exactly what it lacked [KIP-106].

    With unclean.leader.election.enable=true and the ISR dead, the live out-of-sync replica is
    elected as soon as it is back, and exactly the acknowledged records it never received are
    lost — the checker lists them."""
    story = unclean_outcome.stories[ON]
    assert story.alone is not None and story.alone["leader"] == unclean_outcome.out_of_sync, \
        f"{story.topic}-0 with its ISR dead: {story.alone}"
    _assert_exactly_the_unreplicated_lost(unclean_outcome, story)


def test_enabling_it_at_runtime_elects_the_out_of_sync_replica(
        kafka_target: Target, unclean_outcome: Outcome) -> None:
    """Enabling unclean election at runtime elects the out-of-sync replica [KIP-339].

    Setting unclean.leader.election.enable=true on the topic with IncrementalAlterConfigs while
    its partition is offline makes the controller elect the out-of-sync replica, losing exactly
    the acknowledged records that replica never had. ZooKeeper's controller elects on the
    config change; a KRaft controller at its next check of leaderless partitions
    (unclean.leader.election.interval.ms, which the scenario waits for) — and then even when
    the stopped in-sync replica is an eligible leader replica (KIP-966): an ELR member that is
    down does not hold the election back. Measured on Kafka 4.4: the partition stayed offline
    for the 30 s after the change in most runs and was led by the out-of-sync replica in some,
    as the controller's 5-minute check happened to fall inside them."""
    story = unclean_outcome.stories[FLIP]
    _assert_offline_and_refusing(unclean_outcome, story)
    assert story.config == "true"
    _assert_exactly_the_unreplicated_lost(unclean_outcome, story)


def test_an_eligible_leader_replica_leads_after_the_isr_and_loses_nothing_acked(
        kafka_target: Target, unclean_outcome: Outcome) -> None:
    """A replica kept in the ELR may lead when the ISR is gone, losing nothing acked [KIP-966].

    With min.insync.replicas=2, the replica that leaves a 2-replica ISR takes the ISR below its
    minimum, so no acks=all write is acknowledged without it from then on: it holds every
    acknowledged record, and KIP-966 keeps it as an eligible leader replica. When the last ISR
    member stops, the controller elects it — with unclean election off — and nothing
    acknowledged is lost (the checker finds no anomaly on the topic). ZooKeeper mode has no
    ELR: the partition would stay offline."""
    story = unclean_outcome.stories[ELR]
    if not _has_elr(story):
        pytest.skip(f"the {kafka_target.kind} target's metadata has no eligible leader "
                    "replicas (KIP-966: KRaft, Kafka 4.x)")
    assert story.below_min_isr and all(e.type != "ok" for e in story.below_min_isr), \
        f"an acks=all send was acknowledged below min.insync.replicas: {story.below_min_isr}"
    assert story.cut_off is not None and \
        story.cut_off["elr"] == [unclean_outcome.out_of_sync], story.cut_off
    assert story.elected is not None and \
        story.elected["leader"] == unclean_outcome.out_of_sync, story.elected
    assert story.config == "false"
    assert story.read_complete
    found = unclean_outcome.anomalies_of(story.topic)
    assert not found, f"checker on {unclean_outcome.history_dir}: {found}"
