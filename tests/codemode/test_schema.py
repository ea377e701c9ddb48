"""Tool arguments are checked against the tool's JSON schema, with a sentence saying what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from tui.codemode import schema_complaint

ASK = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1},
        "options": {"type": ["array", "null"], "items": {"type": "string"}},
        "multiple": {"type": "boolean"},
        "mode": {"enum": ["fast", "slow"]},
        "count": {"type": "integer", "minimum": 0},
        "meta": {"type": "object", "properties": {"k": {"type": "number"}}, "required": ["k"]},
    },
    "required": ["question"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"question": "Deploy?"},
        {"question": "Deploy?", "options": ["yes", "no"], "multiple": True},
        {"question": "Deploy?", "options": None, "mode": "slow", "count": 3.0, "meta": {"k": 1}},
    ],
)
def test_valid_arguments_pass(arguments: dict[str, Any]) -> None:
    assert schema_complaint(arguments, ASK) is None


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({}, "missing required argument 'question'"),
        ({"question": 3}, "'question' must be a string, not integer"),
        ({"question": ""}, "'question' must be at least 1 characters long"),
        ({"question": "q", "options": ["a", 2]}, "'options'[1] must be a string, not integer"),
        ({"question": "q", "options": "a"}, "'options' must be an array or null, not string"),
        ({"question": "q", "multiple": "yes"}, "'multiple' must be a boolean, not string"),
        ({"question": "q", "mode": "medium"}, "'mode' must be one of 'fast', 'slow', not 'medium'"),
        ({"question": "q", "count": -1}, "'count' must be at least 0"),
        ({"question": "q", "count": True}, "'count' must be an integer, not boolean"),
        ({"question": "q", "meta": {}}, "'meta' needs 'k'"),
        ({"question": "q", "colour": "red"}, "unexpected argument 'colour'"),
    ],
)
def test_invalid_arguments_are_explained(arguments: dict[str, Any], complaint: str) -> None:
    found = schema_complaint(arguments, ASK)
    assert found is not None
    assert found.startswith(complaint)


def test_boolean_schemas() -> None:
    assert schema_complaint(1, True) is None
    assert schema_complaint(1, False) == "arguments is not allowed"
