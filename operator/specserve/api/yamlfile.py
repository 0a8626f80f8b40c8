"""Reading SpecServe YAML files as strictly as kubectl reads them: a key written twice in one mapping is an
error naming the key and both lines (kubectl's strict decoding refuses the file; a lenient loader keeps the last
value silently, so the file would mean something other than what the reader sees)."""

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


def load_all(stream: str | bytes | IO[str]) -> list[Any]:
    """Every document of a YAML stream, empty documents left out; raises yaml.YAMLError (DuplicateKeyError for a
    repeated key)."""
    return [d for d in yaml.load_all(stream, Loader=StrictLoader) if d is not None]
