"""api_key → handler registry and request dispatch (Kafka's KafkaApis, minus the 4,000 lines).

Each module in `server/apis/` registers its handlers with `@api(key, versions)`; the versions
advertised by ApiVersions are read from this registry, so the broker never claims a version it
does not implement. Each declares Apache Kafka 3.9's range, the line the broker is modelled on,
cut only where harness.wire has no types: the old versions Kafka 4 removed (KIP-896), which kio
lacks, and all but one version of each controller -> broker API. The tests hold the advertised
ranges to what Kafka 3.9.2 answered (`tests/kafka_api_versions.py` lists every difference with
its reason).

A handler receives the broker's services and the decoded request and returns a plain-dict
response body (built into the negotiated version's kio type by `harness.wire`), None for "no
response" (acks=0 produce), or an awaitable of either.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.wire import protocol
from harness.wire.produce_response import encode_produce_response
from harness.wire.protocol import ProtocolError, Request

if TYPE_CHECKING:
    from reference_broker.network.socket_server import ConnectionInfo
    from reference_broker.server.broker_services import BrokerServices

log = logging.getLogger("reference_broker.server.kafka_apis")

Handler = Callable[["BrokerServices", Request, "ConnectionInfo"], Any]

PRODUCE_KEY = 0
# What a handler returns when it answers at once; anything else is checked for awaitability
# (inspect.isawaitable's ABC checks cost more than the rest of a small request's dispatch).
_PLAIN_RESULTS = (dict, type(None))


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    zk_only: bool = False  # inter-broker APIs of ZooKeeper mode; hidden from standalone clients


_REGISTRY: dict[int, ApiHandler] = {}


def api(api_key: int, versions: range, *, zk_only: bool = False
        ) -> Callable[[Handler], Handler]:
    """Register a handler for the given versions, limited to the versions kio models.

    A `zk_only` API (controller → broker requests) is advertised only in ZooKeeper mode; a
    standalone broker treats it as an API it does not offer and closes the connection."""
    modelled = set(protocol.modelled_versions(api_key))
    usable = [v for v in versions if v in modelled]
    if not usable or usable != list(range(usable[0], usable[-1] + 1)):
        raise ValueError(f"api {api_key}: versions {versions} not contiguous in kio's models")

    def register(fn: Handler) -> Handler:
        _REGISTRY[api_key] = ApiHandler(api_key, usable[0], usable[-1], fn, zk_only)
        return fn

    return register


def registry() -> dict[int, ApiHandler]:
    from reference_broker.server import apis  # noqa: F401  (imports register the handlers)

    return _REGISTRY


def supports(api_key: int, version: int) -> bool:
    handler = registry().get(api_key)
    return handler is not None and handler.min_version <= version <= handler.max_version


class KafkaApis:
    """Turns one frame into one encoded response, consulting the registry."""

    def __init__(self, services: BrokerServices) -> None:
        self._services = services
        self._handlers = registry()

    def handle_frame(
        self, frame: bytes, conn: ConnectionInfo
    ) -> bytes | list[Any] | None | Awaitable[bytes | list[Any] | None]:
        api_key, version, correlation_id = protocol.peek_header(frame)
        if api_key == protocol.API_VERSIONS_KEY and not supports(api_key, version):
            # KIP-511: answer an unknown ApiVersions version with v0 and our supported range.
            from reference_broker.server.apis.api_versions import unsupported_version_response

            return protocol.encode_response(
                api_key, 0, correlation_id,
                unsupported_version_response(self._services.config.zookeeper_mode))
        request = protocol.decode_request(frame, supports)
        handler = self._handlers[api_key]
        if handler.zk_only and not self._services.config.zookeeper_mode:
            raise ProtocolError(f"{request.api_name} is served only in ZooKeeper mode")
        result = handler.handle(self._services, request, conn)
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            return self._finish_async(request, result)
        return self._encode(request, result)

    async def _finish_async(
        self, request: Request, pending: Awaitable[Any]
    ) -> bytes | list[Any] | None:
        return self._encode(request, await pending)

    @staticmethod
    def _encode(request: Request, body: Any) -> bytes | list[Any] | None:
        """The response frame: bytes, or chunks when it carries file regions (zero-copy fetch)."""
        if body is None:
            return None
        try:
            if request.api_key == PRODUCE_KEY:
                # Once per produced batch: the hand-written writer (kio's bytes, tested so).
                frame = encode_produce_response(request.api_version, request.correlation_id,
                                                body)
                if frame is not None:
                    return frame
            chunks = protocol.encode_response_chunks(
                request.api_key, request.api_version, request.correlation_id, body
            )
        except Exception as exc:
            raise ProtocolError(
                f"could not encode {request.api_name} v{request.api_version} response: {exc}"
            ) from exc
        return chunks[0] if len(chunks) == 1 and isinstance(chunks[0], bytes) else chunks
