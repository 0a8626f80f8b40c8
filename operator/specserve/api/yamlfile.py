"""Reading SpecServe YAML files as strictly as kubectl reads them: a key written twice in one mapping is an
error naming the key and both lines (kubectl's strict decoding refuses the file; a lenient loader keeps the last
value silently, so the file would mean something other than what the reader sees). A value nested deeper than the
YAML reader goes is an error naming the field it is under, not a bare line and column."""

from __future__ import annotations

from collections.abc import Hashable
from typing import IO, Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DuplicateKeyError(ConstructorError):
    """A mapping names one key twice (a yaml.YAMLError, so callers that report invalid YAML report it)."""

    def __init__(self, key: Any, line: int, first_line: int, mark: Any) -> None:
        self.key, self.line, self.first_line = key, line, first_line
        super().__init__(
            None,
            None,
            f'duplicate key "{key}" on line {line} (first on line {first_line}): a mapping holds each key once, '
            "as kubectl requires; remove one of them",
            mark,
        )

    def __str__(self) -> str:
        return str(self.problem)


class StrictLoader(_BASE):  # type: ignore[misc]
    """The safe loader (C-accelerated where available) refusing duplicate keys."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            seen: dict[Hashable, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, Hashable):
                    continue  # the base constructor reports unhashable keys
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise DuplicateKeyError(key, line, seen[key], key_node.start_mark)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class NestingError(yaml.YAMLError):
    """A value nested deeper than the YAML reader goes, with the field it is under."""

    def __init__(self, field: str, where: str) -> None:
        self.field = field
        super().__init__(
            f"{field}: nested deeper than the YAML reader allows ({where}); no SpecServe field nests more than a few "
            "levels: remove the extra brackets or braces"
        )


SHOWN_LEVELS = 10  # a path deeper than this is shown cut, with its depth


def position_path(text: str) -> str:
    """The field (dotted, with [index]) the YAML reader was in when it stopped: events are read until it fails."""
    frames: list[list[Any]] = []  # ["map", key, expecting a key] or ["seq", index, _]
    try:
        for event in yaml.parse(text, Loader=_BASE):
            top = frames[-1] if frames else None
            if isinstance(event, yaml.DocumentStartEvent):
                frames = []
            elif isinstance(
                event, yaml.ScalarEvent | yaml.AliasEvent | yaml.MappingStartEvent | yaml.SequenceStartEvent
            ):
                if top is not None and top[0] == "seq":
                    top[1] += 1
                elif top is not None and top[2]:  # a key (only scalar keys are named)
                    top[1], top[2] = getattr(event, "value", "?"), False
                    if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                        continue
                elif top is not None and isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                    top[2] = True  # a scalar value: the next node is a key
                if isinstance(event, yaml.MappingStartEvent):
                    frames.append(["map", None, True])
                elif isinstance(event, yaml.SequenceStartEvent):
                    frames.append(["seq", -1, False])
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                frames.pop()
                if frames and frames[-1][0] == "map":
                    frames[-1][2] = True
    except yaml.YAMLError:
        pass
    parts = [
        f"[{at}]" if kind == "seq" else f".{at}"
        for kind, at, expecting_key in frames
        if (kind == "seq" and at >= 0) or (kind == "map" and at is not None and not expecting_key)
    ]
    if len(parts) > SHOWN_LEVELS:
        parts = [*parts[:SHOWN_LEVELS], f"... ({len(parts)} levels)"]
    return "".join(parts).lstrip(".") or "(document)"


def load_all(stream: str | bytes | IO[str]) -> list[Any]:
    """Every document of a YAML stream, empty documents left out; raises yaml.YAMLError (DuplicateKeyError for a
    repeated key, NestingError for a value nested too deep)."""
    text = stream if isinstance(stream, str | bytes) else stream.read()
    try:
        return [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" not in str(exc.problem):
            raise
        source = text.decode(errors="replace") if isinstance(text, bytes) else text
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "here"
        raise NestingError(position_path(source), where) from None
