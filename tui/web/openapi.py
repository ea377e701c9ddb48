"""The OpenAPI schema of the web bridge's routes, served at ``/api/openapi.json``.

Written out here rather than gathered from docstrings, so that it says what each route takes;
``tests/web/test_openapi.py`` keeps it and the app's route table the same.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tui import __version__
from tui.protocol import AnswerRequest, DismissRequest, InterruptRequest, ModelRequest, TurnRequest

__all__ = ["OPERATIONS", "schema"]

_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "id or prefix",
}


def _q(name: str, kind: str = "string", description: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": {"type": kind},
        "description": description,
    }


def _body_models() -> dict[str, type[BaseModel]]:
    from tui.web.app import CreateRequest, ShareRequest, StopRequest, WakeRequest

    return {
        "CreateRequest": CreateRequest,
        "WakeRequest": WakeRequest,
        "StopRequest": StopRequest,
        "ShareRequest": ShareRequest,
        "TurnRequest": TurnRequest,
        "AnswerRequest": AnswerRequest,
        "DismissRequest": DismissRequest,
        "InterruptRequest": InterruptRequest,
        "ModelRequest": ModelRequest,
    }


# (method, path, summary, who may, query parameters, body model name, success status)
OPERATIONS: list[tuple[str, str, str, str, list[dict[str, Any]], str | None, int]] = [
    ("get", "/api/info", "what this web bridge is, and who is asking", "any", [], None, 200),
    ("get", "/api/openapi.json", "this schema", "any", [], None, 200),
    (
        "get",
        "/api/sessions",
        "every session",
        "owner",
        [
            _q("archived", "boolean"),
            _q("live", "boolean"),
            _q("working_directory"),
            _q("limit", "integer"),
            _q("sort"),
            _q("order"),
        ],
        None,
        200,
    ),
    ("post", "/api/sessions", "a new session", "owner", [], "CreateRequest", 201),
    ("get", "/api/sessions/resolve", "the full id of a prefix", "read", [_q("id")], None, 200),
    ("get", "/api/sessions/{id}", "one session", "read", [], None, 200),
    ("delete", "/api/sessions/{id}", "remove a session", "owner", [_q("force", "boolean")], None, 200),
    ("post", "/api/sessions/{id}/stop", "stop its worker", "owner", [], "StopRequest", 200),
    ("post", "/api/sessions/{id}/restart", "a new worker", "owner", [], "WakeRequest", 200),
    ("post", "/api/sessions/{id}/archive", "hide it from lists", "owner", [], None, 200),
    ("post", "/api/sessions/{id}/wake", "start its worker if none runs", "read", [], "WakeRequest", 200),
    ("get", "/api/sessions/{id}/worker", "its worker now", "read", [], None, 200),
    ("get", "/api/sessions/{id}/participants", "who it is shared with", "owner", [], None, 200),
    ("post", "/api/sessions/{id}/participants", "share it", "owner", [], "ShareRequest", 201),
    (
        "delete",
        "/api/sessions/{id}/participants",
        "revoke shares",
        "owner",
        [_q("participant")],
        None,
        200,
    ),
    (
        "get",
        "/api/sessions/{id}/events",
        "its event stream (text/event-stream)",
        "read",
        [_q("cursor", "integer"), _q("client_id")],
        None,
        200,
    ),
    ("get", "/api/sessions/{id}/info", "its worker's info", "read", [], None, 200),
    (
        "get",
        "/api/sessions/{id}/transcript",
        "its last turns",
        "read",
        [_q("limit", "integer"), _q("before")],
        None,
        200,
    ),
    ("get", "/api/sessions/{id}/stats", "its figures", "read", [], None, 200),
    ("post", "/api/sessions/{id}/turn", "send a turn", "write", [], "TurnRequest", 202),
    ("post", "/api/sessions/{id}/answer", "answer its question", "write", [], "AnswerRequest", 200),
    (
        "post",
        "/api/sessions/{id}/question/dismiss",
        "dismiss its question",
        "write",
        [],
        "DismissRequest",
        200,
    ),
    ("post", "/api/sessions/{id}/interrupt", "end the running turn", "write", [], "InterruptRequest", 200),
    ("delete", "/api/sessions/{id}/queue/{queue_id}", "take a queued prompt back", "write", [], None, 200),
    ("post", "/api/sessions/{id}/images", "store an image (raw bytes)", "write", [_q("name")], None, 201),
    ("post", "/api/sessions/{id}/model", "switch its model", "owner", [], "ModelRequest", 200),
]


def schema() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document."""
    models = _body_models()
    components: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "detail"],
            "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
        }
    }
    for name, model in models.items():
        components[name] = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(components[name].pop("$defs", {}))
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, who, query, body, status in OPERATIONS:
        params = list(query)
        if "{id}" in path:
            params.insert(0, _ID)
        if "{queue_id}" in path:
            params.insert(
                1, {"name": "queue_id", "in": "path", "required": True, "schema": {"type": "string"}}
            )
        op: dict[str, Any] = {
            "summary": summary,
            "x-permission": who,
            "parameters": params,
            "responses": {
                str(status): {"description": "done"},
                "default": {
                    "description": "a refusal",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        }
        if body is not None:
            op["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
            }
        elif path.endswith("/images"):
            op["requestBody"] = {"required": True, "content": {"image/*": {"schema": {"type": "string"}}}}
        paths.setdefault(path, {})[method] = op
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
