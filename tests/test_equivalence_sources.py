"""The one tree digest (overlay._hashing), and sources read, never run: what a worker can
import, a module's names."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import overlay
from overlay._hashing import tree_digest
from overlay.equivalence import sources


def test_the_key_covers_what_a_worker_can_import_and_nothing_else(tmp_path: Path) -> None:
    package = tmp_path / "overlay"
    shutil.copytree(
        Path(overlay.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    names = {p.relative_to(package).as_posix() for p in sources.worker_sources(package)}
    assert {"equivalence/worker/__main__.py", "equivalence/worker/runner.py",
            "equivalence/worker/lowering.py", "equivalence/worker/envinfo.py",
            "equivalence/corpus/__init__.py", "equivalence/corpus/models.py",
            "fixes/f0004_distinct_output_transpose_slots.py", "equivalence/corpus/zoo.py",
            "equivalence/protocol.py", "runtime.py", "fixes/__init__.py", "lines/pins.py",
            "fixes/model.py", "fixes/f0003_conv_rescale_qparams_from_source.py",
            "equivalence/worker/vgf_run.py", "equivalence/worker/ethosu.py"} <= names  # fmt: skip
    assert not {n for n in names if n.startswith(("cli/", "equivalence/controller/",
                                                  "equivalence/render/"))}  # fmt: skip
    assert "render.py" not in names  # the one renderer of every report, controller-side

    def digest() -> str:
        return tree_digest(package, sources.worker_sources(package))

    before = digest()
    layout = package / "equivalence" / "render" / "layout.py"
    for renderer in (package / "render.py", layout):
        renderer.write_text(renderer.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    (package / "equivalence" / "controller" / "scheduler.py").write_text("# x\n", encoding="utf-8")
    assert digest() == before  # a renderer or controller edit keeps every cached result
    with (package / "equivalence" / "corpus" / "zoo.py").open("a", encoding="utf-8") as zoo:
        zoo.write("\n\ndef late():\n    import overlay.equivalence.render.layout\n")
    assert digest() != before  # a corpus edit changes it; the late import is followed too
    assert {layout, package / "render.py"} <= set(sources.worker_sources(package))
    after = digest()
    (package / "equivalence" / "worker" / "lowering.py").write_text("# y\n", encoding="utf-8")
    assert digest() != after  # a worker-side edit invalidates


def test_the_digest_covers_names_and_bytes_not_the_location(tmp_path: Path) -> None:
    for root in (tmp_path / "one", tmp_path / "two"):
        (root / "sub").mkdir(parents=True)
        (root / "a.py").write_text("A = 1\n", encoding="utf-8")
        (root / "sub" / "b.py").write_text("B = 1\n", encoding="utf-8")
        (root / "notes.txt").write_text("not a source\n", encoding="utf-8")
    one, two = tmp_path / "one", tmp_path / "two"
    assert tree_digest(one) == tree_digest(two)
    (two / "notes.txt").write_text("changed\n", encoding="utf-8")
    assert tree_digest(one) == tree_digest(two)  # only .py files by default
    (two / "sub" / "b.py").rename(two / "sub" / "c.py")
    assert tree_digest(one) != tree_digest(two)  # a renamed file is another tree
    assert tree_digest(one, [one / "a.py"]) == tree_digest(two, [two / "a.py"])


def test_bound_names_and_functions() -> None:
    body = ast.parse(
        "import a.b\nfrom c import d as e\nx = y = 1\ndef f():\n    pass\n"
        "def _private():\n    pass\nclass K:\n    pass\n"
        "try:\n    from g import h\nexcept ImportError:\n    h = None\n"
        "if True:\n    CASES = {}\n"
    ).body
    assert set(sources.bound_names(body)) == {"a", "e", "x", "y", "f", "_private", "K", "h",
                                              "CASES"}  # fmt: skip
    assert sources.functions(body) == ["f"]
    assert "*" in set(sources.bound_names(ast.parse("from m import *\n").body))
