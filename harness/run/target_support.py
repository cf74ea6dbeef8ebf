"""What a run's target can serve, decided before anything starts: a run whose clients need
something the target lacks is refused with the reason, rather than failing once they run.

* KIP-848's consumer group protocol (ConsumerGroupHeartbeat): built-in targets known to lack it
  are refused here; any other target is asked once its cluster is up (the runner).
* Transactions: every built-in kind has them; a recipe claims them or not.
"""

from __future__ import annotations

from harness.cluster.kinds import Capability
from harness.cluster.options import TargetName
from harness.cluster.recipe import Recipe
from harness.workload.group_protocol import CONSUMER_GROUP_HEARTBEAT, GroupProtocol
from harness.workload.kinds import WorkloadKind

NO_CONSUMER_PROTOCOL: dict[str, str] = {
    TargetName.REFERENCE: "the reference broker has Kafka 3.9's group coordinator",
    TargetName.APACHE_KAFKA: "Apache Kafka 3.9 in ZooKeeper mode has no KIP-848 coordinator",
}
"""Built-in targets without ConsumerGroupHeartbeat, and why."""


def group_protocol_problems(group_protocol: str, consumer_mode: str, target: str) -> list[str]:
    """What is wrong with --group-protocol for these options: the consumer protocol is a
    group's, and a target that cannot serve it would only fail once the clients run."""
    if group_protocol not in tuple(GroupProtocol):
        return [f"--group-protocol must be one of {', '.join(GroupProtocol)}"]
    if group_protocol != GroupProtocol.CONSUMER:
        return []
    problems = [] if consumer_mode == "group" else [
        "--group-protocol consumer needs --consumer-mode group: assign-mode consumers join "
        "no group"]
    reason = NO_CONSUMER_PROTOCOL.get(target)
    if reason is not None:
        problems.append(f"--group-protocol consumer needs ConsumerGroupHeartbeat (KIP-848, "
                        f"API key {CONSUMER_GROUP_HEARTBEAT}), which --target {target} "
                        f"lacks: {reason} (--target {TargetName.APACHE_KAFKA_KRAFT} has it)")
    return problems


def transaction_problems(workload: str, recipe: Recipe | None, recipe_path: str | None
                         ) -> list[str]:
    """A transactional workload on a recipe that does not claim transactions."""
    if recipe is None or Capability.TRANSACTIONS in recipe.capabilities:
        return []
    if workload not in tuple(WorkloadKind) or not WorkloadKind(workload).transactional:
        return []  # an unknown workload is workload_problems' to name
    return [f"--workload {workload} needs transactions, which the recipe {recipe_path} does "
            f"not claim (its broker.capabilities lack 'transactions')"]
