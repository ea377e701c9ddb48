"""A guest spends from the session's budget (docs/agents.md, "Budgets"): a collaborator's turn
through a real `tui web`, on a model session against the loopback provider server (priced by
genai-prices as ``gpt-4o``), counts with the owner's and is stopped at the session's cap."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_model_server import FakeModelServer, Text
from helpers import wait_until

from tui.protocol import Budget
from tui.store import StatePaths, create_session

from .conftest import Web, wake


def _ended(web: Web, sid: str) -> list[dict[str, object]]:
    journal = StatePaths(web.state).session(sid).journal
    events = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
    return [e for e in events if e["type"] == "turn_ended"]


def test_a_guests_turn_spends_from_the_sessions_budget_and_is_stopped_at_its_cap(web: Web) -> None:
    with FakeModelServer() as server:
        Path(os.environ["TUI_CONFIG_DIR"], "config.toml").write_text(
            f'[models.local]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{server.url}"\n'
            "context_window = 8192\n"
        )
        # 10,000 tokens in and 500 out cost $0.03 at gpt-4o's price: each turn alone is under $0.05.
        server.script(Text(["mine"], usage=(10_000, 500)), Text(["theirs"], usage=(10_000, 500)))
        sid = create_session(
            StatePaths(web.state),
            working_directory=str(web.state),
            agent="model",
            model="local",
            budget=Budget(cost=0.05),
        ).id
        wake(web, sid)
        owner = web.client()
        assert owner.post(f"/api/sessions/{sid}/turn", json={"prompt": "my work"}).status_code == 202
        wait_until(lambda: len(_ended(web, sid)) == 1, "the owner's turn to end")
        guest = web.client(web.share(sid, "collaborator", name="gus"))
        assert guest.post(f"/api/sessions/{sid}/turn", json={"prompt": "their work"}).status_code == 202
        wait_until(lambda: len(_ended(web, sid)) == 2, "the guest's turn to end")

        mine, theirs = _ended(web, sid)
        assert mine["stop_reason"] is None and mine["cost"] == pytest.approx(0.03)
        assert theirs["stop_reason"] == "budget" and theirs["cost"] == pytest.approx(0.03), theirs
        spent = owner.get(f"/api/sessions/{sid}/budget").json()
        assert spent["cost"] == pytest.approx(0.06) and spent["reached"] == "cost $0.06 of $0.05", spent
        refused = guest.post(f"/api/sessions/{sid}/turn", json={"prompt": "more"})
        assert refused.status_code == 409 and refused.json()["error"] == "budget_reached", refused.text
        # The question whether to raise it: a guest may not raise the owner's limit by answering it.
        wait_until(lambda: owner.get(f"/api/sessions/{sid}/transcript").json()["question"], "the question")
        asked = owner.get(f"/api/sessions/{sid}/transcript").json()["question"]
        raise_to = asked["options"][0]["label"]
        answer = {"question_id": asked["question_id"], "selected": [raise_to]}
        taken = guest.post(f"/api/sessions/{sid}/answer", json=answer)
        assert taken.status_code == 403 and "only the session's owner" in taken.text, taken.text
        assert owner.get(f"/api/sessions/{sid}/budget").json()["budget"]["cost"] == 0.05
        assert len(server.requests) == 2
