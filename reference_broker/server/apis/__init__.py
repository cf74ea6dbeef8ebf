"""Request handlers, one module per API family; importing this package registers them all."""

from reference_broker.server.apis import (  # noqa: F401
    admin,
    api_versions,
    committed_offsets,
    configs,
    describe_producers,
    fetch,
    find_coordinator,
    group_admin,
    group_membership,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    replication,
    transactions,
    write_txn_markers,
)
