"""DescribeConfigs and IncrementalAlterConfigs for topic and broker resources."""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.config import DEFINITIONS
from reference_broker.server import topic_config
from reference_broker.server.admin_manager import AdminError
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.topic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
TOPIC, BROKER = 2, 4
# ConfigType values of DescribeConfigs v3+.
TYPE_STRING = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _topic_entries(services: BrokerServices, name: str, keys: Any, synonyms: bool,
                   docs: bool) -> list[dict]:
    overrides = services.admin_manager.topic_configs(name)
    entries = []
    for config in topic_config.described(services.config, overrides):
        definition = config.definition
        if keys is not None and definition.name not in keys:
            continue
        syn = []
        if synonyms:
            if config.source == DYNAMIC_TOPIC_CONFIG:
                syn.append({"name": definition.name, "value": config.value,
                            "source": DYNAMIC_TOPIC_CONFIG})
            if definition.broker_synonym:
                syn.append({"name": definition.broker_synonym,
                            "value": topic_config.broker_default(services.config,
                                                                 definition.name),
                            "source": topic_config.default_source(services.config,
                                                                  definition.name)})
        entries.append({"name": definition.name, "value": config.value, "read_only": False,
                        "config_source": config.source, "is_sensitive": False,
                        "synonyms": syn, "config_type": definition.config_type,
                        "documentation": definition.allowed if docs else None})
    return entries


def _broker_entries(services: BrokerServices, keys: Any, docs: bool) -> list[dict]:
    entries: list[dict[str, Any]] = []
    for key, value, is_default in services.config.describe():
        if keys is not None and key not in keys:
            continue
        if isinstance(value, tuple):
            value = ",".join(str(v) if not hasattr(v, "listener") else
                             f"{v.listener}://{v.host}:{v.port}" for v in value)
        entries.append({
            "name": key, "value": None if value is None else str(value).lower()
            if isinstance(value, bool) else str(value),
            "read_only": True, "config_source": DEFAULT_CONFIG if is_default
            else STATIC_BROKER_CONFIG, "is_sensitive": False, "synonyms": [],
            "config_type": TYPE_STRING,
            "documentation": DEFINITIONS[key].doc if docs else None,
        })
    return entries


@api(DESCRIBE_CONFIGS, range(1, 5))
def handle_describe_configs(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    docs = getattr(body, "include_documentation", False)
    results = []
    for res in body.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        base = {"resource_type": res.resource_type, "resource_name": res.resource_name}
        try:
            if res.resource_type == TOPIC:
                configs = _topic_entries(services, res.resource_name, keys,
                                         body.include_synonyms, docs)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(services.broker_id)):
                    raise AdminError(ErrorCode.invalid_request,
                                     f"Unexpected broker id, expected {services.broker_id}")
                configs = _broker_entries(services, keys, docs)
            else:
                raise AdminError(ErrorCode.invalid_request,
                                 f"Unsupported resource type {res.resource_type}")
        except AdminError as exc:
            results.append({**base, "error_code": exc.error, "error_message": exc.message,
                            "configs": []})
            continue
        results.append({**base, "error_code": ErrorCode.none, "error_message": None,
                        "configs": configs})
    return {"throttle_time": 0, "results": results}


@api(INCREMENTAL_ALTER_CONFIGS, range(0, 2))
def handle_incremental_alter_configs(services: BrokerServices, request: Any,
                                     conn: Any) -> dict[str, Any]:
    body = request.body
    responses = []
    for res in body.resources:
        base = {"resource_type": res.resource_type, "resource_name": res.resource_name}
        try:
            if res.resource_type != TOPIC:
                raise AdminError(ErrorCode.invalid_request,
                                 "Only topic configs can be altered; broker "
                                 "configs are static on the reference broker")
            configs = _apply_ops(services.admin_manager.topic_configs(res.resource_name),
                                 res.configs)
            services.admin_manager.alter_topic_configs(res.resource_name, configs,
                                                       body.validate_only)
        except AdminError as exc:
            responses.append({**base, "error_code": exc.error, "error_message": exc.message})
            continue
        responses.append({**base, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "responses": responses}


def _apply_ops(current: dict[str, str], ops: Any) -> dict[str, str]:
    result = dict(current)
    names = [op.name for op in ops]
    if len(names) != len(set(names)):
        raise AdminError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for op in ops:
        definition = topic_config.DEFS.get(op.name)
        if definition is None:
            raise AdminError(ErrorCode.invalid_config, f"Unknown topic config name: {op.name}")
        if op.config_operation == SET:
            if op.value is None:
                raise AdminError(ErrorCode.invalid_request,
                                 f"Null value not supported for {op.name}")
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if definition.config_type != 7:
                raise AdminError(ErrorCode.invalid_config,
                                 f"Config value append is not allowed for config key: {op.name}")
            items = [x for x in result.get(op.name, "").split(",") if x]
            for item in (op.value or "").split(","):
                if op.config_operation == APPEND and item and item not in items:
                    items.append(item)
                elif op.config_operation == SUBTRACT and item in items:
                    items.remove(item)
            result[op.name] = ",".join(items)
        else:
            raise AdminError(ErrorCode.invalid_request,
                             f"Unknown config operation {op.config_operation}")
    return result
