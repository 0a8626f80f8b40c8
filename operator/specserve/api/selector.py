"""spec.switching.metrics.seriesSelector: PromQL label matchers and nothing else, scoped to the SpecServe's
namespace (pure).

The selector is pasted between the braces of every query the operator sends for the SpecServe, with the
operator's credentials and reach. So it may only be a comma-separated list of label matchers (label, operator,
double-quoted value): no brace, no operator or function outside a quoted value, so it cannot close the matcher
and inject PromQL. And one matcher must be `<label>namespace="$namespace"` (namespace, kubernetes_namespace,
...: clusters relabel the namespace under different names): matchers are ANDed, so every series it selects
carries the SpecServe's own namespace, whatever else it matches. The schema carries SELECTOR_PATTERN and a CEL
twin of the namespace rule (rules.py), so the API server refuses the same.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

FIELD = "spec.switching.metrics.seriesSelector"
_LABEL = r"(?:[a-zA-Z]|_[a-zA-Z0-9])[a-zA-Z0-9_]*"  # a label name, not a reserved __ one (__name__)
_VALUE = r'"(?:[^"\\]|\\.)*"'  # a PromQL double-quoted string: any character but an unescaped quote
_MATCHER = rf"({_LABEL}) *(=~|!~|!=|=) *({_VALUE})"
SELECTOR_PATTERN = rf"^ *{_MATCHER}( *, *{_MATCHER})* *,? *$"
# The namespace scope as the CEL twin reads it (a regex over the whole text; a quote inside a value is always
# escaped, so this matches real matchers only).
NAMESPACE_SCOPE = r'(^|,) *[a-zA-Z0-9_]*namespace *= *"[$]namespace"'
PLACEHOLDER = "$namespace"


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str  # as written, quotes included


def matchers(selector: str) -> list[Matcher] | None:
    """The label matchers of `selector`, or None when it is anything else."""
    if re.fullmatch(SELECTOR_PATTERN, selector) is None:
        return None
    return [Matcher(*m) for m in re.findall(_MATCHER, selector)]


GRAMMAR = (
    'must be PromQL label matchers only, comma-separated (label="value", label=~"regex", != or !~), with '
    "double-quoted values and no reserved __ label (the operator picks the metric); e.g. "
    'kubernetes_namespace="$namespace",app="$name-$pool"'
)
SCOPE = (
    'must select the SpecServe\'s own namespace: add namespace="$namespace" (or the label your cluster relabels '
    'it to, e.g. kubernetes_namespace="$namespace")'
)


def syntax_problem(selector: str) -> str | None:
    """Why `selector` is not label matchers with the $namespace, $name and $pool placeholders; None when it is."""
    if matchers(selector) is None:
        return GRAMMAR
    try:
        string.Template(selector).substitute(namespace="n", name="n", pool="n")
    except (KeyError, ValueError):
        return "may only substitute $namespace, $name and $pool (write $$ for a literal $)"
    return None


def scoped(selector: str) -> bool:
    """True when an equality matcher pins a namespace label to the SpecServe's namespace (the CEL twin:
    NAMESPACE_SCOPE)."""
    found = matchers(selector) or []
    return any(m.label.endswith("namespace") and m.op == "=" and m.value == f'"{PLACEHOLDER}"' for m in found)


def selector_problem(selector: str) -> str | None:
    """Why `selector` may not be sent to Prometheus, worded for its author; None when it may."""
    return syntax_problem(selector) or (None if scoped(selector) else SCOPE)
