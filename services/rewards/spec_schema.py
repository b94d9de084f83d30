"""The reward spec in the OpenAPI schema, built from the channel registry (issue 20).

Requests take ``spec`` as a free value that :func:`services.rewards.spec.check_spec` checks
field by field (so every problem is named, as ``/v1/rewards/validate`` lists them). The schema
states the same rules: a ``RewardSpec`` object whose ``channels`` holds each channel this
server runs with its own options (from the channel's spec model), or a saved spec's reference.
"""

from __future__ import annotations

from typing import Any, get_args

from plaudit_wire.names import OWNED_REF_REGEX
from plaudit_wire.rewards import AdvantageName
from services.core.channels import ChannelRegistry

SPEC = "RewardSpec"
#: Channel option models and their nested models, named apart from the API's own schemas.
PREFIX = "RewardChannel_"
#: Request models whose ``spec`` is a spec or a saved spec's reference.
TAKES_A_SPEC = ("RewardsGroupRequest", "SpecSaveRequest", "RescoreRequest")


def spec_schema(registry: ChannelRegistry) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(RewardSpec, {name: schema})``: the spec, and the models it refers to."""
    definitions: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    for channel in registry:
        schema = channel.spec.model_json_schema(
            ref_template=f"#/components/schemas/{PREFIX}{{model}}"
        )
        for name, nested in schema.pop("$defs", {}).items():
            definitions[PREFIX + name] = nested
        schema["description"] = channel.description or schema.get("description", "")
        channels[channel.name] = schema
    spec = {
        "type": "object",
        "description": "weighted channels (each with its own options) and an advantage "
        "estimator; odrpo needs a channel that grades on levels 1..K",
        "properties": {
            "channels": {
                "type": "object",
                "properties": channels,
                "additionalProperties": False,
                "minProperties": 1,
            },
            "advantage": {"enum": list(get_args(AdvantageName)), "default": "none"},
        },
        "required": ["channels"],
        "additionalProperties": False,
    }
    return spec, definitions


def show_spec(schema: dict[str, Any], registry: ChannelRegistry) -> None:
    """Write the spec into an OpenAPI schema (in place; repeating it changes nothing)."""
    models = schema.setdefault("components", {}).setdefault("schemas", {})
    spec, definitions = spec_schema(registry)
    models[SPEC] = spec
    models.update(definitions)
    for name in TAKES_A_SPEC:
        field = models.get(name, {}).get("properties", {}).get("spec")
        if field is None:
            continue
        description = field.get("description", "")
        field.clear()
        field.update(
            description=description,
            anyOf=[
                {"$ref": f"#/components/schemas/{SPEC}"},
                {"type": "string", "pattern": OWNED_REF_REGEX},
            ],
        )
