"""The published JSON Schema of the group file format, for editors (yaml-language-server).

Point an editor at it with a first line in the group file::

    # yaml-language-server: $schema=<path or URL of group.schema.json>

``skillgrove schema`` prints it. The loader, not this schema, is the authority: it checks what a
schema cannot (references, cycles, types across steps); a test keeps the two in step.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("group.schema.json")


@cache
def group_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema
