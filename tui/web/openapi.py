"""The OpenAPI document of the web bridge, served at ``/api/openapi.json``.

It is derived from the route table (`tui.protocol.routes`): the web bridge's own routes, and the
session's bridge routes a remote may use under ``/api/sessions/{id}``. Each operation names its
request body's model, its success status with the answer's schema, and the permission it needs
(``x-permission``); a refusal is the `Error` schema.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pydantic import BaseModel

from tui import __version__
from tui.protocol.routes import WEB, RouteSpec, forwarded

__all__ = ["document", "operations"]

_REF = "#/components/schemas/{model}"


def operations() -> list[RouteSpec]:
    """Every operation the web bridge serves, with its path as a remote client uses it."""
    return [*WEB.values(), *forwarded()]


_PATH_PARAMETERS = {
    "id": "a session id or unique prefix",
    "queue_id": "a queued prompt's id (`queue_changed`)",
    "turn_id": "a turn's id (`turn_started`, `/transcript`)",
    "name": "a context source's name (`GET /context`)",
}
"""What each path parameter of the route table is."""


def _parameters(spec: RouteSpec) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for name in re.findall(r"\{(\w+)\}", spec.path):
        params.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": _PATH_PARAMETERS.get(name, ""),
            }
        )
    for p in spec.query:
        params.append(
            {
                "name": p.name,
                "in": "query",
                "required": False,
                "schema": {"type": p.kind},
                "description": p.description,
            }
        )
    return params


def _take(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    components.update(schema.pop("$defs", {}))
    return schema


def _answer_schema(spec: RouteSpec, components: dict[str, Any]) -> dict[str, Any]:
    if isinstance(spec.answer, type) and issubclass(spec.answer, BaseModel):
        name = spec.answer.__name__
        components[name] = _take(spec.answer.model_json_schema(ref_template=_REF), components)
        return {"$ref": _REF.format(model=name)}
    answer = spec.answer_schema(_REF)
    return {"type": "object"} if answer is None else _take(answer, components)


@cache
def document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document."""
    components: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "detail"],
            "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
        }
    }
    paths: dict[str, dict[str, Any]] = {}
    for spec in operations():
        if spec.media != "application/json":
            content: dict[str, Any] = {spec.media: {"schema": {"type": "string"}}}
        else:
            content = {spec.media: {"schema": _answer_schema(spec, components)}}
        op: dict[str, Any] = {
            "operationId": spec.name,
            "summary": spec.summary,
            "x-permission": spec.permission,
            "parameters": _parameters(spec),
            "responses": {
                str(spec.status): {"description": spec.summary, "content": content},
                "default": {
                    "description": "a refusal",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        }
        if spec.request is not None:
            body = spec.request.model_json_schema(ref_template=_REF)
            components[spec.request.__name__] = _take(body, components)
            op["requestBody"] = {
                "required": False,
                "content": {
                    "application/json": {"schema": {"$ref": _REF.format(model=spec.request.__name__)}}
                },
            }
        elif spec.upload is not None:
            op["requestBody"] = {"required": True, "content": {spec.upload: {"schema": {"type": "string"}}}}
        paths.setdefault(spec.path, {})[spec.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "tui web", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
