"""Fill a string.Template with values; lists become bullet lists."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from string import Template
from typing import Any


class _DottedTemplate(Template):
    idpattern = r"(?a:[_a-zA-Z][_a-zA-Z0-9]*(?:\.[_a-zA-Z0-9]+)*)"


def run(values: dict[str, Any], template: str = "", template_path: str = "", strict: bool = True,
        output_dir: str = "", filename: str = "") -> dict[str, Any]:
    if template_path:
        source = Path(template_path).expanduser()
        if not source.is_file():
            raise ValueError(f"template_path: no such file: {source}")
        template = source.read_text(encoding="utf-8")
    if not template:
        raise ValueError("template or template_path: there is no template text")
    if not isinstance(values, dict):
        raise ValueError("values: must be an object of placeholder values")
    compiled = _DottedTemplate(template)
    names = list(dict.fromkeys(m.group("named") or m.group("braced")
                               for m in compiled.pattern.finditer(template)
                               if m.group("named") or m.group("braced")))
    mapping: dict[str, str] = {}
    missing = []
    for name in names:
        found, value = _lookup(values, name)
        if found:
            mapping[name] = _format(value)
        else:
            missing.append(name)
    if missing and strict:
        raise ValueError(f"values: no value for {', '.join('$' + m for m in missing)}; "
                         f"given: {', '.join(sorted(values)) or 'nothing'}")
    text = compiled.safe_substitute(mapping)
    path = ""
    if filename:
        if not re.fullmatch(r"[\w.-]+", filename):
            raise ValueError(f"filename: {filename!r} must be a plain file name")
        folder = (Path(output_dir).expanduser() if output_dir
                  else _default_folder("skillgrove-render-"))
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / filename
        target.write_text(text, encoding="utf-8")
        path = str(target)
    return {"text": text, "path": path, "placeholders": names}


def _lookup(values: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    current: Any = values
    for part in dotted.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, dict):
                lines.append("- " + ", ".join(f"{k}: {_format(v)}" for k, v in item.items()))
            else:
                lines.append(f"- {_format(item)}")
        return "\n".join(lines)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
