"""Facts read from an installed SGLang's source with `ast` (the project's venv never imports sglang)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

METRIC_TYPES = {"Gauge": "gauge", "Counter": "counter", "Histogram": "histogram", "Summary": "summary"}
HTTP_METHODS = {"get", "post", "put", "delete", "patch", "api_route", "head", "options"}


@dataclass(frozen=True)
class MetricDef:
    name: str  # as declared, e.g. "sglang:prompt_tokens_total"
    type: str  # gauge, counter, histogram, summary (or the constructor's name when it is none of these)
    labels: tuple[str, ...] | None  # None when the label expression could not be resolved statically
    owner: str  # class that declares it
    buckets: tuple[float, ...] | None = None  # histogram default buckets, when given as (or via) a list literal

    @property
    def family(self) -> str:
        """The family name Prometheus exposes (prometheus_client drops a counter's _total suffix)."""
        if self.type == "counter" and self.name.endswith("_total"):
            return self.name[: -len("_total")]
        return self.name


def _dict_keys(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        return tuple(str(k.value) for k in node.keys if isinstance(k, ast.Constant))
    return None


def base_labels(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Collector class -> the label names every one of its metrics starts with.

    SchedulerMetricsCollector: the `labels = {...}` literal next to the call that builds it;
    TokenizerMetricsCollector: the literal in `tokenizer_metric_labels()`. Labels added only under a condition
    (priority, dp_rank, --extra-metric-labels) are not part of the base.
    """
    out: dict[str, tuple[str, ...]] = {}
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        literal = None
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "labels" for t in node.targets):
                literal = _dict_keys(node.value) or literal
        if literal is None:
            continue
        source = ast.unparse(func)
        if func.name == "tokenizer_metric_labels":
            out["TokenizerMetricsCollector"] = literal
        elif "scheduler_collector_cls(" in source or "SchedulerMetricsCollector(" in source:
            out["SchedulerMetricsCollector"] = literal
    return out


def _labels(node: ast.AST | None, base: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if node is None:
        return ()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys":
        return base
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple"):
        return _labels(node.args[0], base) if node.args else ()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _labels(node.left, base), _labels(node.right, base)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.List | ast.Tuple):
        out: list[str] = []
        for element in node.elts:
            part = _labels(element.value if isinstance(element, ast.Starred) else element, base)
            if isinstance(element, ast.Constant):
                out.append(str(element.value))
            elif part is None:
                return None
            else:
                out += part
        return tuple(out)
    if isinstance(node, ast.Constant):
        return (str(node.value),)
    return None


def _numbers(node: ast.AST | None) -> tuple[float, ...] | None:
    if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
        return None
    out: list[float] = []
    for element in node.elts:
        if not (isinstance(element, ast.Constant) and isinstance(element.value, int | float)):
            return None
        out.append(float(element.value))
    return tuple(out)


def _buckets(node: ast.AST | None, lists: dict[str, tuple[float, ...]]) -> tuple[float, ...] | None:
    if isinstance(node, ast.Name):
        return lists.get(node.id)
    return _numbers(node)


def metric_definitions(path: Path) -> list[MetricDef]:
    """Every `Gauge/Counter/Histogram/Summary(name="sglang:...", labelnames=...)` in a collector module.

    A histogram's `buckets=` is resolved when it is a list literal or a local name assigned one in the same
    method (SGLang's `if bucket_x is None: bucket_x = [...]` defaults).
    """
    tree = ast.parse(path.read_text())
    bases = base_labels(tree)
    found: dict[str, MetricDef] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for func in (n for n in ast.walk(cls) if isinstance(n, ast.FunctionDef)):
            _collect(func, cls.name, bases.get(cls.name), found)
    return list(found.values())


def _collect(func: ast.FunctionDef, owner: str, base: tuple[str, ...] | None, found: dict[str, MetricDef]) -> None:
    lists: dict[str, tuple[float, ...]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            numbers = _numbers(node.value)
            if numbers is not None:
                lists[node.targets[0].id] = numbers
    for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
        constructor = call.func.id if isinstance(call.func, ast.Name) else None
        if constructor is None:
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        name_node = keywords.get("name") or (call.args[0] if call.args else None)
        if not (isinstance(name_node, ast.Constant) and str(name_node.value).startswith("sglang:")):
            continue
        found[str(name_node.value)] = MetricDef(
            name=str(name_node.value),
            type=METRIC_TYPES.get(constructor, constructor),
            labels=_labels(keywords.get("labelnames"), base),
            owner=owner,
            buckets=_buckets(keywords.get("buckets"), lists),
        )


def http_routes(path: Path) -> set[str]:
    """Paths of `@app.get("/x")`-style decorators and `app.add_api_route("/x", ...)` calls."""
    tree = ast.parse(path.read_text())
    routes: set[str] = set()
    for node in ast.walk(tree):
        calls: list[ast.expr] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            calls = list(node.decorator_list)
        elif isinstance(node, ast.Call):
            calls = [node]
        for call in calls:
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            method = call.func.attr
            if method not in HTTP_METHODS and method != "add_api_route":
                continue
            if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                routes.add(call.args[0].value)
            elif call.args and isinstance(call.args[0], ast.Call):  # os.environ.get("X", "/default")
                defaults = [a.value for a in call.args[0].args[1:] if isinstance(a, ast.Constant)]
                routes.update(str(d) for d in defaults)
    return routes


def mounts(path: Path, function: str) -> set[str]:
    """Paths given to `Mount("/x", ...)` inside `function` (SGLang mounts /metrics this way)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef) and func.name == function:
            for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id == "Mount" and call.args:
                    first = call.args[0]
                    if isinstance(first, ast.Constant):
                        out.add(str(first.value))
    return out
