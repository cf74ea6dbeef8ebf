"""The errors of Toxiproxy's HTTP API, with the status codes and messages its clients expect.

Clients branch on the status code (toxiproxy-python raises ``ProxyExists`` on 409,
``NotFound`` on 404, ``InvalidToxic`` on 400), so every failure inside the built-in server is
raised as an :class:`ApiError` carrying the code Toxiproxy would answer with, and the HTTP layer
turns it into ``{"error": ..., "status": ...}``.
"""

from __future__ import annotations

from http import HTTPStatus


class ApiError(Exception):
    """A request failed; ``status`` is the HTTP status Toxiproxy answers with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


def bad_request_body(reason: str) -> ApiError:
    return ApiError(f"bad request body: {reason}", HTTPStatus.BAD_REQUEST)


def missing_field(field: str) -> ApiError:
    return ApiError(f"missing required field: {field}", HTTPStatus.BAD_REQUEST)


def proxy_not_found() -> ApiError:
    return ApiError("proxy not found", HTTPStatus.NOT_FOUND)


def proxy_already_exists() -> ApiError:
    return ApiError("proxy already exists", HTTPStatus.CONFLICT)


def toxic_not_found() -> ApiError:
    return ApiError("toxic not found", HTTPStatus.NOT_FOUND)


def toxic_already_exists() -> ApiError:
    return ApiError("toxic already exists", HTTPStatus.CONFLICT)


def invalid_stream() -> ApiError:
    return ApiError(
        "stream was invalid, can be either upstream or downstream", HTTPStatus.BAD_REQUEST
    )


def invalid_toxic_type(kind: object, known: list[str]) -> ApiError:
    return ApiError(
        f"invalid toxic type: {kind!r}; known types are {known}", HTTPStatus.BAD_REQUEST
    )


def bind_failed(address: str, error: OSError) -> ApiError:
    """Listening failed (port taken, address not local): Toxiproxy answers 500 for this."""
    return ApiError(
        f"listen tcp {address}: {error.strerror or error}", HTTPStatus.INTERNAL_SERVER_ERROR
    )
