"""Small builders for test libraries written into tmp_path."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.graph.embeddings import Encoder

FIXTURE_LIBRARY = Path(__file__).resolve().parent / "fixtures" / "library"


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def copy_fixture_library(dest: Path) -> Path:
    shutil.copytree(FIXTURE_LIBRARY, dest, dirs_exist_ok=True)
    return dest


def write_group(root: Path, name: str, text: str) -> Path:
    path = root / "groups" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def indexed_store(root: Path, skills: Mapping[str, str], groups: Mapping[str, str],
                  encoder: Encoder) -> EmbeddedStore:
    """An in-memory store indexing a library written into ``root``: instruction-only skills
    (name -> description) and group files (id -> YAML text)."""
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.graph.indexer import index_library
    from skillgrove.groups.library import load_library
    from skillgrove.skills.loader import LoadOptions

    for name, description in skills.items():
        write_skill(root / "skills", name, f"---\nname: {name}\ndescription: {description}\n---\n")
    for gid, text in groups.items():
        write_group(root, f"{gid}.yaml", text)
    library = load_library([root], LoadOptions())
    assert not library.errors, [e.format() for e in library.errors]
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    return store


def group_yaml(gid: str, first: str, last: str, examples: Sequence[str],
               name: str | None = None) -> str:
    """A group file that runs ``first``, then ``last`` (one step when they are the same skill),
    with ``examples`` as its past requests; named ``name``, else its id."""
    listed = "\n".join(f"  - {e}" for e in examples)
    if first == last:
        steps = f"steps:\n  - id: only\n    skill: {first}\n"
    else:
        steps = (f"steps:\n  - id: first\n    skill: {first}\n"
                 f"  - id: last\n    skill: {last}\n    needs: [first]\n")
    return (f"id: {gid}\nname: {name or gid}\ndescription: Runs {first}, then {last}.\n"
            f"examples:\n{listed}\n{steps}")

