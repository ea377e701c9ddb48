"""`Throttle`, the limit on wrong sign-in codes, with a clock of the test's own."""

from __future__ import annotations

import pytest

from tui.errors import RateLimited
from tui.web.signin import Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_address_gets_its_burst_then_one_code_each_refill_and_others_are_not_held_back() -> None:
    clock = Clock()
    limit = Throttle(burst=3, every=10.0, all_burst=100, all_every=0.1, clock=clock)
    for _ in range(3):
        limit.check("10.0.0.1")
        limit.charge("10.0.0.1")
    with pytest.raises(RateLimited) as refused:
        limit.check("10.0.0.1")
    assert refused.value.fields["retry_after"] == 10 and "from this address" in refused.value.detail
    limit.check("10.0.0.2")  # another address still may
    clock.now = 9.0
    with pytest.raises(RateLimited) as later:
        limit.check("10.0.0.1")
    assert later.value.fields["retry_after"] == 1
    clock.now = 10.0
    limit.check("10.0.0.1")


def test_everyone_together_is_limited_too_and_addresses_kept_are_bounded() -> None:
    clock = Clock()
    limit = Throttle(burst=5, every=1.0, all_burst=4, all_every=2.0, clock=clock)
    limit.MAX_ADDRESSES = 3
    for n in range(4):
        limit.check(f"10.0.0.{n}")
        limit.charge(f"10.0.0.{n}")
    with pytest.raises(RateLimited) as refused:
        limit.check("10.0.0.9")
    assert "from everyone" in refused.value.detail and refused.value.fields["retry_after"] == 2
    assert len(limit._by) <= 3
