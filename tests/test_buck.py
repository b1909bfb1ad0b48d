"""Files a patch creates join upstream's BUCK lists beside their siblings (the export, on main)."""

from __future__ import annotations

from pathlib import Path

from overlay._git import git
from overlay.text.series import parse_patch
from overlay.upstream.commit_rules import Identity
from overlay.upstream.gitrepo import MAIN_REF, open_upstream
from overlay.upstream.prepare import buck_files, buck_listed, export_against

from scaffold import created_diff

SHADERS = "backends/arm/vgf/shaders"
BUCK = """\
# Copyright 2026 Arm Limited and/or its affiliates.
python_library(
    srcs = [
        "vgf/shaders/__init__.py",
        "vgf/shaders/grid_sampler.py",
    ],
    resources = [
        "vgf/shaders/grid.glsl",
        "vgf/shaders/grid.spirv.b64",
        "vgf/shaders/grid_int8.glsl",
        "vgf/shaders/grid_int8.spirv.b64",
    ],
)
"""


def _lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


def test_a_created_file_joins_its_siblings_block_in_sorted_order() -> None:
    created = [f"{SHADERS}/grid_nearest.spirv.b64", f"{SHADERS}/grid_nearest.glsl"]
    found = buck_listed(created, {"backends/arm/BUCK": BUCK.encode()})
    lines = _lines(found["backends/arm/BUCK"])
    resources = lines[lines.index("    resources = [") + 1 : lines.index("    ],", 6)]
    assert [line.strip() for line in resources] == [
        '"vgf/shaders/grid.glsl",',
        '"vgf/shaders/grid.spirv.b64",',
        '"vgf/shaders/grid_int8.glsl",',
        '"vgf/shaders/grid_int8.spirv.b64",',
        '"vgf/shaders/grid_nearest.glsl",',
        '"vgf/shaders/grid_nearest.spirv.b64",',
    ]
    assert all(line.startswith('        "') for line in resources)
    assert lines[3:5] == [
        '        "vgf/shaders/__init__.py",',
        '        "vgf/shaders/grid_sampler.py",',
    ]
    assert buck_listed(created, found) == {}  # listed already: nothing to add


def test_a_first_entry_goes_before_the_block_and_the_nearest_buck_wins() -> None:
    created = [f"{SHADERS}/a.glsl"]
    inner = 'resources = [\n    "x.glsl",\n]\n'
    found = buck_listed(
        created, {"backends/arm/BUCK": BUCK.encode(), f"{SHADERS}/BUCK": inner.encode()}
    )
    assert list(found) == [f"{SHADERS}/BUCK"]
    assert _lines(found[f"{SHADERS}/BUCK"]) == [
        "resources = [",
        '    "a.glsl",',
        '    "x.glsl",',
        "]",
    ]


def test_a_folder_no_buck_lists_changes_nothing() -> None:
    assert buck_listed(["backends/arm/other/new.glsl"], {"backends/arm/BUCK": BUCK.encode()}) == {}
    assert buck_listed([f"{SHADERS}/new.py"], {}) == {}
    assert buck_files(["a/b/c.glsl"]) == ["a/b/BUCK", "a/BUCK", "BUCK"]


def test_the_export_on_main_lists_a_created_shader_in_main_s_buck(tmp_path: Path) -> None:
    shader = f"{SHADERS}/grid_nearest.glsl"
    patch = parse_patch(
        "0001-demo.patch",
        "Description: Arm backend: Add a shader\n Body.\nAuthor: A\nForwarded: no\n"
        "Last-Update: 2026-12-02\n---\n" + created_diff(shader, "void main() {}\n"),
    )
    clone = tmp_path / "clone"
    (clone / "backends/arm").mkdir(parents=True)
    (clone / "backends/arm/BUCK").write_text(BUCK)
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=U", "-c", "user.email=u@x.org", "commit", "-qm", "main")
    scratch = open_upstream(str(clone), tmp_path / "scratch")
    signer = Identity("Jane Doe", "j@x.org")
    item = export_against(patch, scratch, scratch.rev(MAIN_REF), ({}, "ab" * 20), signer)
    assert item.before == {"backends/arm/BUCK": BUCK.encode()}
    assert '+        "vgf/shaders/grid_nearest.glsl",\n' in item.mbox
    assert f" create mode 100644 {shader}\n" in item.mbox
