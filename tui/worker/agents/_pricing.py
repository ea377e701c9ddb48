"""What a model's usage cost in USD: its profile's own price (``price_input``/``price_output``
of ``[models.NAME]``), else the maintained price table of genai-prices (docs/dependencies.md)."""

from __future__ import annotations

import logging
from typing import Any

from tui.config import ModelProfile

__all__ = ["price_of"]

log = logging.getLogger("tui.worker")

_unknown: set[str] = set()
"""Models the table does not know (told in the log once)."""


def price_of(profile: ModelProfile, usage: Any) -> float | None:
    """USD of `usage` (pydantic-ai's `RunUsage`) at `profile`'s model; None when no price is known.

    Tokens read from the provider's cache are priced as the table says (cheaper), or at the input
    price with a profile's own price.
    """
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    if profile.price_input is not None or profile.price_output is not None:
        per_in = profile.price_input or 0.0
        per_out = profile.price_output or 0.0
        return (input_tokens * per_in + output_tokens * per_out) / 1_000_000
    from genai_prices import Usage, calc_price

    try:
        priced = calc_price(
            Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=getattr(usage, "cache_read_tokens", 0) or None,
                cache_write_tokens=getattr(usage, "cache_write_tokens", 0) or None,
            ),
            model_ref=profile.model,
            provider_id=profile.provider,
        )
    except (LookupError, ValueError) as exc:
        if profile.model not in _unknown:
            _unknown.add(profile.model)
            log.info("no price for %s (%s): its cost is not counted", profile.model, exc)
        return None
    return float(priced.total_price)
