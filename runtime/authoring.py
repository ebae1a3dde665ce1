"""Authoring groups: check group YAML as ``skillgrove check`` would, edit a group file without
disturbing what the edit does not touch, and save it into a library's groups folder.

A group's new text comes from one of three sources, the same for checking and saving:

- ``text``: the whole file, as written;
- ``document``: the group as a JSON object, written out as YAML in the bundled files' style
  (two-space indents, ``needs`` as a flow list, long text as a ``|`` block);
- ``edits``: changes to the file at ``path``, applied with a round-trip YAML parser
  (``ruamel.yaml``) so that its comments, key order, quoting and layout stay where untouched::

      [{"op": "set", "path": "steps[2].with.text", "value": "${{ steps.read.outputs.text }}"},
       {"op": "delete", "path": "steps[1].retry"},
       {"op": "append", "path": "steps", "value": {"id": "notify", "skill": "send-email"}}]

Drafts (what ``skillgrove groups suggest`` writes into ``groups/drafts/``) are listed with their
diagnostics, edited like any group file, approved (moved up into ``groups/``, once they pass
the check) or discarded.

Saving writes only inside a ``groups/`` folder of the engine's library (a path that resolves
anywhere else is refused), shows the change as a unified diff first (``dry_run``, the default),
and re-indexes the library once the file is written.

>>> check_group(engine, Source(document={"id": "g", "description": "d", "steps": []}))
{'valid': False, ..., 'diagnostics': [{'rule': 'missing-field', ...}]}
>>> save_group(engine, "g.yaml", Source(document=doc), dry_run=True)["diff"]
'--- /dev/null\\n+++ b/groups/g.yaml\\n...'
>>> save_group(engine, "report.yaml", Source(edits=[{"op": "set", "path": "steps[1].timeout",
...                                                  "value": "30s"}]), dry_run=False)
"""

from __future__ import annotations

import difflib
import hashlib
import io
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillgrove.runtime.errors import InvalidRequestError, NotFoundError

if TYPE_CHECKING:
    from ruamel.yaml import YAML

    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.skills.diagnostics import Diagnostic

__all__ = ["Source", "apply_edits", "approve_draft", "check_group", "discard_draft", "drafts",
           "group_source", "groups_folders", "render_document", "save_group"]

GROUP_SUFFIXES = (".yaml", ".yml")
EDIT_OPS = ("set", "delete", "append")
_STEP_PREFIX = re.compile(r"^steps\[(\d+)\](?:\.([^:\s]+))?:")
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")

# (mapping, sequence, offset) indents tried, in order, to write an edited file back in its own
# layout: the first that reproduces the untouched file exactly is used.
_INDENTS = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (4, 4, 0), (2, 2, 2), (3, 3, 0))


@dataclass(frozen=True, slots=True)
class Source:
    """Where a group's new text comes from: exactly one of ``text``, ``document``, ``edits``."""

    text: str | None = None
    document: Mapping[str, Any] | None = None
    edits: Sequence[Mapping[str, Any]] | None = None

    def given(self) -> str:
        named = [name for name in ("text", "document", "edits")
                 if getattr(self, name) is not None]
        if len(named) != 1:
            raise InvalidRequestError(
                "text", "send exactly one of text, document or edits"
                + (f" (got {', '.join(named)})" if named else ""))
        return named[0]


# -- where group files live -------------------------------------------------------------------


def groups_folders(engine: Skillgrove) -> list[Path]:
    """The ``groups/`` folder of each library root (a root that is itself one counts)."""
    folders: list[Path] = []
    for root in engine.paths:
        folder = root if root.name == "groups" else root / "groups"
        if root.is_dir() and folder.resolve() not in folders:
            folders.append(folder.resolve())
    return folders


def _target(engine: Skillgrove, path: str) -> tuple[Path, Path]:
    """(the file, the groups folder it is in) for ``path``: relative to the first groups folder
    (``my-group.yaml`` or ``groups/my-group.yaml``), or absolute inside any of them."""
    folders = groups_folders(engine)
    if not folders:
        raise InvalidRequestError("path", "the library has no folder to write groups into")
    raw = Path(path)
    if not path.strip() or "\x00" in path:
        raise InvalidRequestError("path", "name the group file, e.g. my-group.yaml")
    if raw.suffix not in GROUP_SUFFIXES:
        raise InvalidRequestError("path", f"'{path}' is not a group file: end it in .yaml")
    if not raw.is_absolute() and raw.parts[:1] == ("groups",):
        raw = Path(*raw.parts[1:])
    candidate = (raw if raw.is_absolute() else folders[0] / raw).resolve()
    for folder in folders:
        if candidate.is_relative_to(folder):
            return candidate, folder
    raise InvalidRequestError("path", f"'{path}' is outside the library's groups folders "
                              f"({', '.join(map(str, folders))}); group files are written "
                              "only there")


def _relative(file: Path, folder: Path) -> str:
    return f"groups/{file.relative_to(folder).as_posix()}"


def group_source(engine: Skillgrove, group_id: str) -> dict[str, Any]:
    """A group file as it is on disk: its text, its data as JSON, its path (relative to its
    groups folder, as :func:`save_group` takes it) and its sha256."""
    gid = group_id.removeprefix("group:")
    library = engine.library
    group = library.groups.get(gid)
    file = Path(group.path) if group is not None else None
    if file is None:
        for load in library.group_loads:
            if load.group is not None and load.group.id == gid:
                file = Path(load.path)
    if file is None:
        engine.group(gid)  # raises not_found with a did-you-mean
        raise NotFoundError.named("group", gid)
    text = file.read_text(encoding="utf-8")
    file = file.resolve()
    folder = next((f for f in groups_folders(engine) if file.is_relative_to(f)), None)
    return {"id": gid, "location": str(file),
            "path": _relative(file, folder) if folder is not None else None,
            "writable": folder is not None, "draft": file.parent.name == "drafts"
            and file.parent.parent == folder, "text": text, "sha256": _sha(text),
            "document": _plain_data(text)}


# -- edits and rendering ----------------------------------------------------------------------


def _yaml(indent: tuple[int, int, int] = _INDENTS[0]) -> YAML:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line the edit did not touch
    yaml.indent(mapping=indent[0], sequence=indent[1], offset=indent[2])
    return yaml


def _dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _round_trip(text: str) -> tuple[YAML, Any]:
    """The parsed file and a writer that reproduces it as it is (when one of the layouts
    tried does; else the bundled files' layout)."""
    from ruamel.yaml.error import YAMLError

    for indent in _INDENTS:
        yaml = _yaml(indent)
        try:
            data = yaml.load(text)
        except YAMLError as exc:
            raise InvalidRequestError("text", f"the file is not valid YAML, so it cannot be "
                                      f"edited in place: {exc}") from exc
        if _dump(yaml, data) == text:
            return yaml, data
    yaml = _yaml()
    return yaml, yaml.load(text)


def parse_path(path: str) -> list[str | int]:
    """``steps[2].with.text`` -> ``['steps', 2, 'with', 'text']``."""
    parts: list[str | int] = []
    position = 0
    for match in _PATH_PART.finditer(path):
        gap = path[position:match.start()]
        if gap not in ("", "."):
            break
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        position = match.end()
    if not parts or position != len(path) or path.startswith(".") or path.endswith("."):
        raise InvalidRequestError("edits", f"'{path}' is not a path like steps[2].with.text")
    return parts


def apply_edits(text: str, edits: Sequence[Mapping[str, Any]]) -> str:
    """``text`` with ``edits`` applied; what they do not touch stays byte for byte."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if text.strip() and _plain_data(text) is None:
        raise InvalidRequestError("edits", "the file does not read as YAML (see its "
                                  "diagnostics), so it cannot be edited in place: send the "
                                  "whole text instead")
    yaml, data = _round_trip(text)
    if data is None:
        data = CommentedMap()
    for number, edit in enumerate(edits):
        where = f"edits[{number}]"
        if not isinstance(edit, Mapping):
            raise InvalidRequestError(where, "an edit is an object {op, path, value?}")
        op = edit.get("op", "set")
        unknown = set(edit) - {"op", "path", "value"}
        if op not in EDIT_OPS or unknown:
            raise InvalidRequestError(where, f"op must be one of {', '.join(EDIT_OPS)}"
                                      if op not in EDIT_OPS
                                      else f"unknown field {sorted(unknown)[0]!r}")
        if not isinstance(edit.get("path"), str):
            raise InvalidRequestError(f"{where}.path", "a path like steps[2].with.text")
        parts = parse_path(edit["path"])
        if op != "delete" and "value" not in edit:
            raise InvalidRequestError(f"{where}.value", f"'{op}' needs a value")
        parent: Any = data
        for depth, part in enumerate(parts[:-1]):
            nxt = parts[depth + 1]
            parent = _child(parent, part, create=op != "delete",
                            empty=CommentedSeq if isinstance(nxt, int) else CommentedMap,
                            where=f"{where}.path")
            if parent is None:
                break
        last = parts[-1]
        if op == "delete":
            if parent is not None:
                _delete(parent, last)
            continue
        value = _styled(edit["value"])
        if op == "append":
            target = _child(parent, last, create=True, empty=CommentedSeq,
                            where=f"{where}.path")
            if not isinstance(target, list):
                raise InvalidRequestError(f"{where}.path", f"'{edit['path']}' is not a list")
            target.append(value)
        else:
            order = (_GROUP_ORDER if len(parts) == 1 else
                     _STEP_ORDER if len(parts) == 3 and parts[0] == "steps" else ())
            _set(parent, last, value, where=f"{where}.path", order=order)
    return _dump(yaml, data)


def _child(parent: Any, part: str | int, *, create: bool, empty: type, where: str) -> Any:
    if isinstance(part, int):
        if not isinstance(parent, list) or not -len(parent) <= part < len(parent):
            raise InvalidRequestError(where, f"no item [{part}] there")
        return parent[part]
    if not isinstance(parent, dict):
        raise InvalidRequestError(where, f"'{part}' is asked of something that is not a "
                                  "mapping")
    if part not in parent or parent[part] is None:
        if not create:
            return None
        parent[part] = empty()
    return parent[part]


def _delete(parent: Any, part: str | int) -> None:
    in_list = isinstance(part, int) and isinstance(parent, list) \
        and -len(parent) <= part < len(parent)
    if in_list or (isinstance(part, str) and isinstance(parent, dict) and part in parent):
        del parent[part]


def _set(parent: Any, part: str | int, value: Any, *, where: str,
         order: Sequence[str] = ()) -> None:
    from ruamel.yaml.scalarstring import ScalarString

    if isinstance(part, int):
        if not isinstance(parent, list) or not -len(parent) <= part <= len(parent):
            raise InvalidRequestError(where, f"no item [{part}] there")
        if part == len(parent):
            parent.append(value)
            return
        old = parent[part]
    else:
        if not isinstance(parent, dict):
            raise InvalidRequestError(where, f"'{part}' is set on something that is not a "
                                      "mapping")
        old = parent.get(part)
    # A string keeps the quoting of the one it replaces ("..." stays "...").
    if isinstance(old, ScalarString) and isinstance(value, str) and "\n" not in value:
        value = type(old)(value)
    if isinstance(part, str) and part not in parent and part in order:
        # A new key goes where the bundled files have it (if before with:), not at the end.
        later = [i for i, key in enumerate(parent) if key in order
                 and order.index(key) > order.index(part)]
        if later and hasattr(parent, "insert"):
            parent.insert(later[0], part, value)
            return
    parent[part] = value


def _styled(value: Any) -> Any:
    """A JSON value as ruamel data: text over several lines as a ``|`` block, lists of short
    words (``needs``, tags) in flow style."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, str):
        return LiteralScalarString(value) if "\n" in value else value
    if isinstance(value, Mapping):
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[str(key)] = _styled(item)
        return mapping
    if isinstance(value, list):
        seq = CommentedSeq(_styled(item) for item in value)
        if not value or all(isinstance(item, str) and len(item) < 40
                            and not any(c.isspace() for c in item) for item in value):
            seq.fa.set_flow_style()
        return seq
    return value


_GROUP_ORDER = ("id", "name", "description", "examples", "tags", "expose", "inputs", "steps",
                "outputs")
_STEP_ORDER = ("id", "skill", "group", "needs", "if", "retry", "timeout", "continue_on_error",
               "with")


def _ordered(mapping: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """The keys of ``order`` first, in that order; any others after, as they came."""
    rank = {key: i for i, key in enumerate(order)}
    return dict(sorted(mapping.items(), key=lambda item: rank.get(item[0], len(rank))))


def render_document(document: Mapping[str, Any]) -> str:
    """A group given as JSON, written as YAML in the bundled files' style (their key order:
    id, name, description, examples, inputs, steps, outputs; in a step id, skill, needs, if,
    retry, timeout, continue_on_error, with)."""
    yaml = _yaml()
    ordered = _ordered(document, _GROUP_ORDER)
    if isinstance(ordered.get("steps"), list):
        ordered["steps"] = [_ordered(step, _STEP_ORDER) if isinstance(step, Mapping) else step
                            for step in ordered["steps"]]
    from ruamel.yaml.comments import CommentedMap

    data: Any = _styled(ordered)
    for step in data.get("steps") or []:
        retry: Any = step.get("retry") if isinstance(step, dict) else None
        if isinstance(retry, CommentedMap) and len(retry) <= 3:  # {max_attempts: 3}, as bundled
            retry.fa.set_flow_style()
    return _dump(yaml, data)


def _plain_data(text: str) -> Any:
    """The file's data, read by the loader ``check`` uses (under its limits: no alias bombs,
    no deep nesting), or None when it does not read."""
    from skillgrove.skills._yaml import YamlSyntaxError, load_located

    try:
        return load_located(text).value
    except YamlSyntaxError:
        return None


# -- checking ---------------------------------------------------------------------------------


def _new_text(engine: Skillgrove, source: Source, path: str | None
              ) -> tuple[Path | None, Path | None, str | None, str]:
    """(file, its groups folder, its text now or None, the new text)."""
    kind = source.given()
    file = folder = None
    old: str | None = None
    if path is not None:
        file, folder = _target(engine, path)
        if file.is_file():
            old = file.read_text(encoding="utf-8")
    if kind == "text":
        assert source.text is not None
        return file, folder, old, source.text
    if kind == "document":
        assert source.document is not None
        if not isinstance(source.document, Mapping):
            raise InvalidRequestError("document", "the group as a JSON object")
        return file, folder, old, render_document(source.document)
    if old is None:
        raise InvalidRequestError("path", "edits apply to an existing group file: name it in "
                                  "path" if path is None else f"no group file '{path}' to edit")
    assert source.edits is not None
    return file, folder, old, apply_edits(old, source.edits)


def check_group(engine: Skillgrove, source: Source, path: str | None = None) -> dict[str, Any]:
    """The diagnostics ``skillgrove check`` would give the group, against the engine's
    library (its skills, and its other groups as sub-groups), and the text they refer to.
    Nothing is written."""
    file, _, _, text = _new_text(engine, source, path)
    return _check_text(engine, text, file)


def _check_text(engine: Skillgrove, text: str, file: Path | None) -> dict[str, Any]:
    from skillgrove.groups.loader import load_group_text
    from skillgrove.groups.validate import validate_group
    from skillgrove.skills.diagnostics import Diagnostic, Severity

    library = engine.library
    where = file or (groups_folders(engine) or [Path.cwd()])[0] / "untitled.yaml"
    load = load_group_text(text, where)
    found: list[Diagnostic] = list(load.diagnostics)
    group = load.group
    if group is not None:
        others = {gid: g for gid, g in library.groups.items()
                  if Path(g.path).resolve() != where.resolve()}
        if group.id in others:
            found.append(Diagnostic(
                Severity.ERROR, "duplicate-group",
                f"group id '{group.id}' is already defined in {others[group.id].path}",
                where, *group.source.value_at(("id",)), hint="give each group its own id",
                subject=group.id))
        checked = validate_group(group, library.catalog.active, {**others, group.id: group},
                                 text)
        misplaced = {(leaf.line, leaf.column) for d in checked for leaf in (d, *d.follow_ons)
                     if leaf.rule == "misplaced-input"}
        found = [d for d in found
                 if not (d.rule == "unknown-field" and (d.line, d.column) in misplaced)]
        found.extend(checked)
    found.sort(key=lambda d: (d.line or 0, d.column or 0, d.rule))
    # Only text the group loader read (within its limits) is parsed again to place the steps.
    step_ids = _step_ids(text) if group is not None else []
    diagnostics = [_diagnostic(d, step_ids) for d in found]
    return {"valid": not any(d.is_error for d in found), "text": text,
            "id": group.id if group is not None else None,
            "errors": sum(1 for d in found if d.is_error),
            "warnings": sum(1 for d in found if not d.is_error),
            "diagnostics": diagnostics}


def _step_ids(text: str) -> list[tuple[int, int, str | None]]:
    """(first line, last line, id) of each step, in order (1-based; empty when the steps cannot
    be located)."""
    from ruamel.yaml import YAML

    try:
        loaded = YAML(typ="rt").load(text)
        steps = loaded["steps"]
        starts = [steps.lc.item(index)[0] + 1 for index in range(len(steps))]
        keys = list(loaded)
        after = keys[keys.index("steps") + 1:]
        end = loaded.lc.key(after[0])[0] if after else len(text.splitlines())
    except Exception:  # not parseable, no steps: the loader's diagnostics say why
        return []
    out: list[tuple[int, int, str | None]] = []
    for index, step in enumerate(steps):
        last = starts[index + 1] - 1 if index + 1 < len(starts) else end
        sid = step.get("id") if isinstance(step, dict) else None
        out.append((starts[index], last, str(sid) if sid is not None else None))
    return out


def _diagnostic(d: Diagnostic, steps: list[tuple[int, int, str | None]]) -> dict[str, Any]:
    """The diagnostic as JSON, with the step it concerns (``step_id``) and the field in that
    step (``field``, e.g. ``with.text``) where they can be told."""
    data = d.to_dict()
    data["step_id"] = None
    data["field"] = None
    match = _STEP_PREFIX.match(d.message)
    if match and int(match.group(1)) < len(steps):
        data["step_id"] = steps[int(match.group(1))][2]
        data["field"] = match.group(2)
    elif d.subject is not None and any(d.subject == sid for _, _, sid in steps):
        data["step_id"] = d.subject
    elif d.line is not None:
        data["step_id"] = next((sid for first, last, sid in steps if first <= d.line <= last),
                               None)
    return data


# -- saving -----------------------------------------------------------------------------------


def save_group(engine: Skillgrove, path: str, source: Source, *, dry_run: bool = True,
               base_sha256: str | None = None) -> dict[str, Any]:
    """Write (or, with ``dry_run``, only show) the group file at ``path`` inside a groups
    folder: the unified diff, the diagnostics of the new text, and whether it was written.
    ``base_sha256`` (from :func:`group_source`) refuses to overwrite a file changed since."""
    file, folder, old, text = _new_text(engine, source, path)
    assert file is not None and folder is not None
    if base_sha256 is not None and old is not None and _sha(old) != base_sha256:
        raise InvalidRequestError("base_sha256", f"{_relative(file, folder)} changed on disk "
                                  "since it was opened: reload it, then edit again")
    if old is None and base_sha256 is not None:
        raise InvalidRequestError("base_sha256", f"{_relative(file, folder)} no longer exists")
    relative = _relative(file, folder)
    diff = "".join(difflib.unified_diff(
        (old or "").splitlines(keepends=True), text.splitlines(keepends=True),
        fromfile=f"a/{relative}" if old is not None else "/dev/null",
        tofile=f"b/{relative}"))
    checked = _check_text(engine, text, file)
    written = False
    if not dry_run and text != old:
        _write_atomically(file, text)
        written = True
        engine.reload()
        engine.ensure_fresh(force=True)
    return {"path": relative, "location": str(file), "created": old is None,
            "changed": text != old, "written": written, "dry_run": dry_run, "diff": diff,
            "sha256": _sha(text), **{k: checked[k] for k in ("valid", "id", "errors",
                                                             "warnings", "diagnostics")}}


def _write_atomically(file: Path, text: str) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- drafts -----------------------------------------------------------------------------------


def _draft_file(engine: Skillgrove, draft_id: str) -> tuple[Path, Path]:
    """(the draft's file, the groups folder above its drafts folder)."""
    found = engine.library.drafts
    group = found.get(draft_id)
    if group is None:
        raise NotFoundError.named("draft", draft_id, sorted(found))
    file = Path(group.path).resolve()
    folder = next((f for f in groups_folders(engine) if file.is_relative_to(f)), None)
    if folder is None:
        raise InvalidRequestError("draft", f"{file} is not in a groups folder of the library")
    return file, folder


def drafts(engine: Skillgrove) -> list[dict[str, Any]]:
    """Every draft group of the library, with what the check says of it."""
    out: list[dict[str, Any]] = []
    for draft_id, group in sorted(engine.library.drafts.items()):
        file, folder = _draft_file(engine, draft_id)
        checked = _check_text(engine, file.read_text(encoding="utf-8"), file)
        out.append({"id": draft_id, "name": group.name, "description": group.description,
                    "path": _relative(file, folder), "location": str(file),
                    "steps": [step.id for step in group.steps],
                    "members": [step.target for step in group.steps],
                    **{k: checked[k] for k in ("valid", "errors", "warnings", "diagnostics")}})
    return out


def approve_draft(engine: Skillgrove, draft_id: str, path: str | None = None) -> dict[str, Any]:
    """Move a draft that passes the check up into ``groups/`` (as ``<id>.yaml`` unless
    ``path`` names another file there): from then on it is an ordinary group."""
    file, folder = _draft_file(engine, draft_id)
    target, _ = _target(engine, path or f"{draft_id}.yaml")
    if target.parent.name == "drafts":
        raise InvalidRequestError("path", "approving moves the draft out of drafts/: name a "
                                  "file in the groups folder")
    if target.exists():
        raise InvalidRequestError("path", f"{_relative(target, folder)} exists already: "
                                  "name another file")
    text = file.read_text(encoding="utf-8")
    checked = _check_text(engine, text, target)
    if not checked["valid"]:
        raise InvalidRequestError("draft", f"draft '{draft_id}' has {checked['errors']} "
                                  "error(s): fix them (edit the draft), then approve it")
    _write_atomically(target, text)
    file.unlink()
    engine.reload()
    engine.ensure_fresh(force=True)
    return {"id": draft_id, "approved": True, "path": _relative(target, folder),
            "location": str(target), "from": _relative(file, folder)}


def discard_draft(engine: Skillgrove, draft_id: str) -> dict[str, Any]:
    """Delete a draft's file."""
    file, folder = _draft_file(engine, draft_id)
    file.unlink()
    engine.reload()
    return {"id": draft_id, "discarded": True, "path": _relative(file, folder)}


# -- sample files for a run's inputs ------------------------------------------------------------

SAMPLES_LIMIT = 500
"""At most this many sample files are listed (a library's ``samples/`` is meant to be small)."""
_NOT_SAMPLES = (".py", ".pyc", ".sh")


def samples(engine: Skillgrove) -> list[dict[str, Any]]:
    """The files of each library root's ``samples/`` folder, for a file input of a run: name,
    absolute path and size. Dotfiles, links and the scripts that make the samples are left
    out. Skills may read them: library roots are mounted read-only in the sandbox.

    >>> samples(engine)[0]
    {'name': 'article.html', 'path': '/.../library/samples/article.html', 'size': 2807}
    """
    found: list[dict[str, Any]] = []
    for root in engine.paths:
        folder = root / "samples"
        if folder.is_symlink() or not folder.is_dir():
            continue
        for file in sorted(folder.iterdir(), key=lambda f: f.name.lower()):
            if (file.name.startswith(".") or file.suffix in _NOT_SAMPLES or file.is_symlink()
                    or not file.is_file()):
                continue
            found.append({"name": file.name, "path": str(file.absolute()),
                          "size": file.stat().st_size})
            if len(found) >= SAMPLES_LIMIT:
                return found
    return found
