"""Reading SGLang's /metrics text with prometheus_client's parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

ACCEPT_LENGTH = "sglang:spec_accept_length"


def gauge_mean(text: str, name: str) -> float | None:
    """Mean of a gauge's series; None when absent or all zero (a server without speculation)."""
    values = [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
        if sample.name == name
    ]
    positive = [v for v in values if v > 0]
    return sum(positive) / len(positive) if positive else None


def accept_length(text: str) -> float | None:
    """The server's current mean acceptance length; None when absent or the text does not parse."""
    try:
        return gauge_mean(text, ACCEPT_LENGTH)
    except ValueError:
        return None
