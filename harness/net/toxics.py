"""Toxic definitions: what the API accepts, validates and returns for each toxic type.

This module is only the description of a toxic (name, type, stream, toxicity, attributes) and
its JSON form; what a toxic does to bytes lives in :mod:`harness.net.toxic_behaviours`. The two
are separate because a definition is shared by every live connection of a proxy while the
behaviour runs once per connection and direction.

Toxiproxy silently ignores unknown attributes and lets negative or fractional values through
to its Go decoder; this server rejects them with a 400 naming the attribute and the allowed
names, because a misspelt ``latncy`` that adds no latency makes a fault test pass for the wrong
reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from harness.net.api_error import (
    bad_request_body,
    invalid_stream,
    invalid_toxic_type,
)


class Stream(StrEnum):
    """Direction of a toxic: upstream is client -> server, downstream is server -> client."""

    UPSTREAM = "upstream"
    DOWNSTREAM = "downstream"


ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "latency": ("latency", "jitter"),
    "bandwidth": ("rate",),
    "slow_close": ("delay",),
    "timeout": ("timeout",),
    "reset_peer": ("timeout",),
    "slicer": ("average_size", "size_variation", "delay"),
    "limit_data": ("bytes",),
    "noop": (),
}
"""Each toxic type and its integer attributes, in the order Toxiproxy lists them."""


@dataclass(frozen=True)
class Toxic:
    """One toxic as the API shows it; immutable so a running behaviour never sees a half-update."""

    name: str
    type: str
    stream: Stream
    toxicity: float
    attributes: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type,
            "stream": str(self.stream),
            "toxicity": self.toxicity,
        }


def toxic_from_json(body: object) -> Toxic:
    """Build a toxic from a create request, applying Toxiproxy's defaults.

    Defaults: stream ``downstream``, toxicity 1.0, name ``<type>_<stream>``, every attribute 0.
    """
    if not isinstance(body, dict):
        raise bad_request_body("expected a JSON object")
    kind = body.get("type")
    if kind not in ATTRIBUTES:
        raise invalid_toxic_type(kind, sorted(ATTRIBUTES))
    try:
        stream = Stream(body.get("stream", Stream.DOWNSTREAM))
    except ValueError:
        raise invalid_stream() from None
    name = body.get("name") or f"{kind}_{stream}"
    if not isinstance(name, str):
        raise bad_request_body(f"toxic name must be a string, got {name!r}")
    defaults = dict.fromkeys(ATTRIBUTES[kind], 0)
    attributes = _merged_attributes(kind, defaults, body.get("attributes"))
    toxicity = _toxicity(body.get("toxicity", 1.0))
    return Toxic(name=name, type=kind, stream=stream, toxicity=toxicity, attributes=attributes)


def toxic_updated(toxic: Toxic, body: object) -> Toxic:
    """Apply an update request: attributes not named keep their value, as in Toxiproxy."""
    if not isinstance(body, dict):
        raise bad_request_body("expected a JSON object")
    attributes = _merged_attributes(toxic.type, toxic.attributes, body.get("attributes"))
    toxicity = _toxicity(body.get("toxicity", toxic.toxicity))
    return replace(toxic, attributes=attributes, toxicity=toxicity)


def _merged_attributes(kind: str, current: Mapping[str, int], given: object) -> dict[str, int]:
    merged = dict(current)
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise bad_request_body(f"attributes must be a JSON object, got {given!r}")
    allowed = ATTRIBUTES[kind]
    for key, value in given.items():
        if key not in allowed:
            raise bad_request_body(
                f"unknown attribute {key!r} for a {kind} toxic; allowed: {list(allowed)}"
            )
        merged[key] = _non_negative_int(key, value)
    _check_consistency(kind, merged)
    return merged


def _non_negative_int(key: str, value: object) -> int:
    if not isinstance(value, bool) and isinstance(value, int | float):
        integral = isinstance(value, int) or value.is_integer()
        if integral and value >= 0:
            return int(value)
    raise bad_request_body(f"attribute {key!r} must be a non-negative integer, got {value!r}")


def _check_consistency(kind: str, attributes: Mapping[str, int]) -> None:
    """Reject combinations that would make the behaviour meaningless.

    Toxiproxy's slicer needs ``size_variation < average_size`` (its own comment says so) and
    panics on data when ``average_size`` is 0; here those are 400s at creation time instead.
    """
    if kind == "slicer":
        average, variation = attributes["average_size"], attributes["size_variation"]
        if average < 1:
            raise bad_request_body("slicer attribute 'average_size' must be at least 1")
        if variation >= average:
            raise bad_request_body(
                "slicer attribute 'size_variation' must be less than 'average_size'"
            )


def _toxicity(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise bad_request_body(f"toxicity must be a number from 0 to 1, got {value!r}")
    return float(value)
