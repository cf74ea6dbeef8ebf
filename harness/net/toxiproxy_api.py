"""Toxiproxy's HTTP API v2: routes, request validation and response bodies.

Transport-free: :meth:`ToxiproxyApi.handle` takes a method, path segments and body and returns
a status and a JSON-able value, so the HTTP plumbing (:mod:`harness.net.toxiproxy_server`)
stays separate from what the API means. Status codes and shapes are Toxiproxy's, because
clients branch on them: 201 for a created proxy, 200 with the toxic for a created toxic, 204
for deletes and reset, 409 on duplicates, 404 on unknown names, 400 on bad bodies, 500 when a
listener cannot bind. A path no route matches gets the real server's (Go's router's) answers:
404 with the text ``404 page not found``, and 405 with an empty body for a known path with
another method.

Requests are handled one at a time (a single lock), as Toxiproxy serialises changes to its
proxy collection: a toxic being added while its proxy is being disabled must see one order.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import NamedTuple

from harness.net.api_error import (
    ApiError,
    bad_request_body,
    missing_field,
    proxy_already_exists,
    proxy_not_found,
)
from harness.net.proxy import DEFAULT_LISTEN, Proxy
from harness.net.toxics import toxic_from_json

VERSION = "2.12.0+kafka-harness"
"""Toxiproxy's API version this server implements, marked as ours in the build metadata."""

PAGE_NOT_FOUND = b"404 page not found\n"
"""The body real Toxiproxy answers a path it has no route for with (plain text, not JSON)."""

log = logging.getLogger(__name__)

Result = tuple[int, object]
"""A status and a JSON-able value; ``None`` is an empty body, ``bytes`` a plain-text one."""
Handler = Callable[..., Awaitable[Result]]


class ToxiproxyApi:
    """The proxy collection and every API operation on it."""

    def __init__(self) -> None:
        self.proxies: dict[str, Proxy] = {}
        self._lock = asyncio.Lock()
        self._routes: dict[tuple[str, ...], dict[str, Handler]] = {
            ("reset",): {"POST": self._reset},
            ("version",): {"GET": self._version},
            ("populate",): {"POST": self._populate},
            ("proxies",): {"GET": self._list_proxies, "POST": self._create_proxy},
            ("proxies", "*"): {
                "GET": self._show_proxy,
                "POST": self._update_proxy,
                "PATCH": self._update_proxy,
                "DELETE": self._delete_proxy,
            },
            ("proxies", "*", "toxics"): {"GET": self._list_toxics, "POST": self._create_toxic},
            ("proxies", "*", "toxics", "*"): {
                "GET": self._show_toxic,
                "POST": self._update_toxic,
                "PATCH": self._update_toxic,
                "DELETE": self._delete_toxic,
            },
        }

    async def handle(self, method: str, segments: list[str], body: bytes) -> Result:
        """Answer one request; errors come back as Toxiproxy's ``{"error", "status"}`` body."""
        route = self._route(segments)
        if route is None:
            return HTTPStatus.NOT_FOUND, PAGE_NOT_FOUND
        methods, names = route
        handler = methods.get(method)
        if handler is None:
            return HTTPStatus.METHOD_NOT_ALLOWED, None
        try:
            async with self._lock:
                return await handler(*names, body=body)
        except ApiError as error:
            return _error(error)
        except Exception as error:
            log.exception("%s /%s failed", method, "/".join(segments))
            return _error(ApiError(f"internal error: {error}", HTTPStatus.INTERNAL_SERVER_ERROR))

    async def close(self) -> None:
        """Stop every proxy: listeners closed, connections closed."""
        async with self._lock:
            for proxy in self.proxies.values():
                await proxy.stop()

    def _route(self, segments: list[str]) -> tuple[dict[str, Handler], list[str]] | None:
        """The handlers for a path and the names its ``*`` parts captured, or ``None``."""
        for pattern, methods in self._routes.items():
            if len(pattern) == len(segments) and all(
                part in ("*", segment) for part, segment in zip(pattern, segments, strict=True)
            ):
                names = [s for p, s in zip(pattern, segments, strict=True) if p == "*"]
                return methods, names
        return None

    def _proxy(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise proxy_not_found()
        return proxy

    async def _version(self, *, body: bytes) -> Result:
        return HTTPStatus.OK, {"version": VERSION}

    async def _reset(self, *, body: bytes) -> Result:
        """Enable every proxy and remove every toxic (closing what timeout toxics held)."""
        for proxy in self.proxies.values():
            await proxy.start()
            await proxy.remove_all_toxics()
        return HTTPStatus.NO_CONTENT, None

    async def _list_proxies(self, *, body: bytes) -> Result:
        return HTTPStatus.OK, {name: self.proxies[name].to_json() for name in sorted(self.proxies)}

    async def _create_proxy(self, *, body: bytes) -> Result:
        fields = _proxy_fields(_json_object(body), position=None)
        if fields.name in self.proxies:
            raise proxy_already_exists()
        proxy = Proxy(fields.name, fields.listen, fields.upstream)
        if fields.enabled:
            await proxy.start()
        self.proxies[proxy.name] = proxy
        return HTTPStatus.CREATED, proxy.to_json()

    async def _populate(self, *, body: bytes) -> Result:
        """Create or replace a list of proxies; an unchanged proxy is left as it is.

        Every entry is checked before anything changes. A proxy whose listen or upstream
        differs from the existing one of that name replaces it (losing its toxics), as in
        Toxiproxy. A listener that fails to bind stops the request there with a 500; entries
        applied before it stay applied and are listed in the error body.
        """
        entries = _json_body(body)
        if not isinstance(entries, list):
            raise bad_request_body("expected a JSON array of proxies")
        wanted = [_proxy_fields(entry, position=index + 1) for index, entry in enumerate(entries)]
        names = [fields.name for fields in wanted]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise bad_request_body(f"duplicate proxy names {duplicates}")
        candidates = [Proxy(f.name, f.listen, f.upstream) for f in wanted]
        applied: list[Proxy] = []
        for fields, candidate in zip(wanted, candidates, strict=True):
            existing = self.proxies.get(candidate.name)
            if existing is not None and (existing.listen, existing.upstream) == (
                candidate.listen,
                candidate.upstream,
            ):
                applied.append(existing)
                continue
            if existing is not None:
                await existing.stop()
                del self.proxies[existing.name]
            try:
                if fields.enabled:
                    await candidate.start()
            except ApiError as error:
                body_json = error.to_json() | {"proxies": [p.to_json() for p in applied]}
                return error.status, body_json
            self.proxies[candidate.name] = candidate
            applied.append(candidate)
        return HTTPStatus.CREATED, {"proxies": [proxy.to_json() for proxy in applied]}

    async def _show_proxy(self, name: str, *, body: bytes) -> Result:
        return HTTPStatus.OK, self._proxy(name).to_json()

    async def _update_proxy(self, name: str, *, body: bytes) -> Result:
        """POST (what toxiproxy-python sends) and PATCH both update; omitted fields are kept."""
        proxy = self._proxy(name)
        given = _json_object(body)
        listen = _string(given, "listen", proxy.listen)
        upstream = _string(given, "upstream", proxy.upstream)
        enabled = given.get("enabled", proxy.enabled)
        if not isinstance(enabled, bool):
            raise bad_request_body(f"enabled must be true or false, got {enabled!r}")
        await proxy.update(listen, upstream, enabled)
        return HTTPStatus.OK, proxy.to_json()

    async def _delete_proxy(self, name: str, *, body: bytes) -> Result:
        proxy = self._proxy(name)
        await proxy.stop()
        del self.proxies[name]
        return HTTPStatus.NO_CONTENT, None

    async def _list_toxics(self, name: str, *, body: bytes) -> Result:
        return HTTPStatus.OK, [toxic.to_json() for toxic in self._proxy(name).ordered_toxics()]

    async def _create_toxic(self, name: str, *, body: bytes) -> Result:
        proxy = self._proxy(name)
        toxic = toxic_from_json(_json_body(body))
        proxy.add_toxic(toxic)
        return HTTPStatus.OK, toxic.to_json()

    async def _show_toxic(self, name: str, toxic: str, *, body: bytes) -> Result:
        return HTTPStatus.OK, self._proxy(name).find_toxic(toxic).to_json()

    async def _update_toxic(self, name: str, toxic: str, *, body: bytes) -> Result:
        updated = await self._proxy(name).update_toxic(toxic, _json_body(body))
        return HTTPStatus.OK, updated.to_json()

    async def _delete_toxic(self, name: str, toxic: str, *, body: bytes) -> Result:
        await self._proxy(name).remove_toxic(toxic)
        return HTTPStatus.NO_CONTENT, None


def _error(error: ApiError) -> Result:
    return error.status, error.to_json()


def _json_body(body: bytes) -> object:
    if not body.strip():
        raise bad_request_body("EOF")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request_body(str(error)) from None


def _json_object(body: bytes) -> dict[str, object]:
    value = _json_body(body)
    if not isinstance(value, dict):
        raise bad_request_body("expected a JSON object")
    return value


def _string(given: dict[str, object], key: str, default: str) -> str:
    value = given.get(key, default)
    if not isinstance(value, str):
        raise bad_request_body(f"{key} must be a string, got {value!r}")
    return value


class _ProxyFields(NamedTuple):
    name: str
    listen: str
    upstream: str
    enabled: bool


def _proxy_fields(entry: object, position: int | None) -> _ProxyFields:
    """Name, listen, upstream and enabled of a proxy in a create or populate request."""
    where = "" if position is None else f" at proxy {position}"
    if not isinstance(entry, dict):
        raise bad_request_body(f"expected a JSON object{where}")
    name = _string(entry, "name", "")
    upstream = _string(entry, "upstream", "")
    if not name:
        raise missing_field(f"name{where}")
    if not upstream:
        raise missing_field(f"upstream{where}")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise bad_request_body(f"enabled must be true or false{where}, got {enabled!r}")
    listen = _string(entry, "listen", "") or DEFAULT_LISTEN
    return _ProxyFields(name, listen, upstream, enabled)
