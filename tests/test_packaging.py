"""The wheel installs one package, ``skillgrove``, that lives beside PyPI's unrelated ``skills``,
``groups`` and ``runtime`` and beside an agent project's own ``graph.py``; importing it is cheap.

The wheel is built from this checkout and installed with pip into a fresh virtual environment,
together with the three namesakes (from the wheelhouse ``.ci/setup`` fills). skillgrove's own
dependencies are not installed again (gigabytes): a ``.pth`` line lends the project venv's
site-packages, and the packages of that venv's editable install are not visible through it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WHEELS = Path(os.environ.get("SKILLGROVE_WHEELS", Path.home() / ".cache/skillgrove/wheels"))
NAMESAKES = ["skills==0.3.0", "groups==0.1", "runtime==0.1.4"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(REPO)], check=True, timeout=300)
    (built,) = out.glob("skillgrove-*.whl")
    return built


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"skillgrove"}
    for member in ("skillgrove/__init__.py", "skillgrove/py.typed",
                   "skillgrove/skills/loader.py", "skillgrove/groups/group.schema.json",
                   "skillgrove/graph/retrieval.py", "skillgrove/runtime/engine.py",
                   "skillgrove/runtime/_bundled_library/groups/report-analysis.yaml"):
        assert member in names, member
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_next_to_pypi_namesakes_and_a_project_graph_py(wheel: Path,
                                                                 tmp_path: Path) -> None:
    missing = [n for n in NAMESAKES if not list(WHEELS.glob(n.replace("==", "-") + "-*.whl"))]
    assert not missing, f"run `bash .ci/setup` to put {missing} into {WHEELS}"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--find-links", str(WHEELS), str(wheel), *NAMESAKES], check=True,
                   timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True).stdout
    lent = next(p for p in sys.path if p.endswith("site-packages"))
    (Path(site.strip()) / "lent_dependencies.pth").write_text(lent + "\n")

    project = tmp_path / "agent-project"
    project.mkdir()
    (project / "graph.py").write_text("WHO = 'the project'\n")
    script = textwrap.dedent("""
        import sys, time
        started = time.perf_counter()
        import skillgrove
        elapsed = time.perf_counter() - started
        heavy = [m for m in ("torch", "onnxruntime", "numpy", "yaml", "jsonschema")
                 if m in sys.modules]
        assert not heavy, heavy
        import importlib.util, pathlib
        import graph
        assert graph.WHO == "the project", graph.__file__
        # The namesakes are found where pip put them. Two of them are Python 2 era and no longer
        # import on 3.11 (skills: `from collections import Sequence`; runtime: `thread`), so
        # only groups is imported; for all three, being the module found is what counts.
        for name, marker in (("skills", "glicko.py"), ("groups", "Group.py"),
                             ("runtime", "runtime.py")):
            spec = importlib.util.find_spec(name)
            origin = pathlib.Path(spec.origin)
            assert origin.is_relative_to(sys.prefix), origin
            assert (origin.parent / marker).exists(), origin
        import groups
        assert pathlib.Path(groups.__file__).is_relative_to(sys.prefix)
        from skillgrove import Skillgrove
        from skillgrove.graph.retrieval import Retriever
        from skillgrove.skills.model import Skill
        assert skillgrove.__file__.startswith(sys.prefix), skillgrove.__file__
        library = Skillgrove().check()
        assert len(library.skills) == 48 and len(library.groups) == 11, library.diagnostics
        print(f"import skillgrove: {elapsed * 1000:.1f} ms")
    """)
    result = subprocess.run([str(python), "-c", script], cwd=project, capture_output=True,
                            text=True, timeout=300,
                            env={**os.environ, "SKILLGROVE_PATH": ""})
    assert result.returncode == 0, result.stderr
    assert "import skillgrove:" in result.stdout
    version = subprocess.run([str(venv / "bin" / "skillgrove"), "--version"], cwd=project,
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("skillgrove 0."), version


def test_importing_skillgrove_loads_nothing_heavy() -> None:
    script = ("import sys, skillgrove; from skillgrove import Skillgrove; "
              "print(sorted(m for m in ('torch', 'onnxruntime', 'numpy', 'sentence_transformers',"
              " 'neo4j', 'yaml', 'jsonschema') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip() == "[]"
