"""The remembered render: the same manifests as render() while nothing changes, fresh copies every time."""

from __future__ import annotations

import copy
from typing import Any

from specserve.api.models import Mode
from specserve.api.validation import parse_object
from specserve.kube.kinds import DEPLOYMENT
from specserve.reconcile.intent import with_template_hash
from specserve.reconcile.rendered import forget, remembered_render
from specserve.render import render


def body(kimi_doc: dict[str, Any], image: str | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(kimi_doc)
    doc["metadata"].update(uid="u-1", generation=1)
    if image is not None:
        doc["spec"]["engine"]["image"] = image
    return doc


def expected(obj: Any, mode: Mode) -> list[dict[str, Any]]:
    return [with_template_hash(m) if m["kind"] == DEPLOYMENT.kind else m for m in render(obj, mode)]


def test_a_remembered_render_equals_a_fresh_one_and_callers_get_their_own_copy(kimi_doc: dict[str, Any]) -> None:
    obj = parse_object(body(kimi_doc))
    first = remembered_render(obj, Mode.BASELINE)
    first[0]["metadata"]["name"] = "changed by a caller"
    again = remembered_render(obj, Mode.BASELINE)
    assert again == expected(obj, Mode.BASELINE)
    assert remembered_render(obj, Mode.SPECULATIVE) == expected(obj, Mode.SPECULATIVE)  # the mode is part of the key


def test_any_change_renders_again(kimi_doc: dict[str, Any]) -> None:
    old = parse_object(body(kimi_doc))
    remembered_render(old, Mode.BASELINE)
    new = parse_object(body(kimi_doc, image="registry.example.com/sglang:next"))
    assert remembered_render(new, Mode.BASELINE) == expected(new, Mode.BASELINE) != expected(old, Mode.BASELINE)
    forget(new.metadata.namespace, new.metadata.name)
    assert remembered_render(new, Mode.BASELINE) == expected(new, Mode.BASELINE)


def test_metadata_that_render_does_not_read_leaves_the_result_as_a_fresh_render(kimi_doc: dict[str, Any]) -> None:
    doc = body(kimi_doc)
    remembered_render(parse_object(doc), Mode.BASELINE)
    doc["metadata"].update(resourceVersion="7", annotations={"specserve.io/last-handled-configuration": "{}"})
    obj = parse_object(doc)
    assert remembered_render(obj, Mode.BASELINE) == expected(obj, Mode.BASELINE)
