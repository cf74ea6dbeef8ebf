"""Request handlers, one module per API family; importing this package registers them all."""

from reference_broker.server.apis import (  # noqa: F401
    admin,
    api_versions,
    configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
