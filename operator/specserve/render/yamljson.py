"""JSON text that YAML reads back as the same value: what the templates write (`tojson`) and what an apply sends
(the API server YAML-decodes application/apply-patch+yaml).

Not ASCII-escaped: YAML refuses the surrogate-pair escapes JSON writes for a character outside the BMP (an emoji in
an env value). The characters YAML refuses raw (C1 controls, DEL, U+FFFE, U+FFFF) or reads as a line break inside a
quoted string (NEL, U+2028, U+2029: folded to a space) are escaped as \\uXXXX, which YAML accepts in the BMP; JSON
escapes the C0 controls itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")


def yaml_safe_json(value: Any, **kwargs: Any) -> str:
    """json.dumps(value, **kwargs), UTF-8 rather than ASCII, with YAML's unsafe characters escaped."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
