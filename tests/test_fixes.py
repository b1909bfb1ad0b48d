"""The fix registry: discovery, lookups, claims per release, validation against the lines.

The toy fix (number 99) (tests/toy_fixes) joins the real ones: the registry, the claim
listing and the docs table pick it up from its module and its line folders alone.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import docs_tables
import pytest
import toy_fix

from overlay import fixes, lines
from overlay.equivalence import corpus
from overlay.equivalence.protocol import ErrorInfo, ItemResult, PathId, RunStatus, Stage
from overlay.equivalence.verdict import BC, decide
from overlay.errors import OverlayError
from overlay.fixes import overview
from overlay.fixes.model import (
    DiffOnly,
    Direction,
    Divergence,
    Effect,
    ErrorSignature,
    Fix,
    RuntimeForm,
    Trigger,
)
from overlay.items import ProbeInfo
from overlay.lines import evidence
from overlay.lines.evidence import Status
from overlay.text.series import load_series

from scaffold import created_diff

ROOT = Path(__file__).resolve().parent.parent
NO_EVIDENCE = evidence.LineEvidence(1, "", "", "", ())
DOCS = ROOT / "docs" / "fixes.md"
P = Stage.PROBE


def _real_modules() -> list[ModuleType]:
    return fixes.fix_modules()


def _toy_registry(**change: object) -> fixes.Registry:
    """The real fixes plus the toy one (``change`` replaces fields of its FIX)."""
    toy = toy_fix.load_module()
    vars(toy)["FIX"] = dataclasses.replace(toy.FIX, **change)
    return fixes.from_modules([*_real_modules(), toy])


def _module(name: str, fix: Fix | None) -> ModuleType:
    module = ModuleType(name)
    if fix is not None:
        module.FIX = fix  # type: ignore[attr-defined]
    return module


# --- discovery -----------------------------------------------------------------------------


def _line_numbers() -> set[int]:
    """Every fix number a line's series or evidence names (carried, ported or dropped)."""
    found = set()
    for line in lines.all_lines(ROOT / "patches"):
        found |= {p.number for p in load_series(line.directory).patches}
        found |= {int(p.patch[:4]) for p in (evidence.load(line.directory) or NO_EVIDENCE).patches}
    return found


def test_the_registry_is_discovered_one_module_per_fix() -> None:
    modules = sorted((ROOT / "overlay" / "fixes").glob("f[0-9][0-9][0-9][0-9]_*.py"))
    assert [f.number for f in fixes.FIXES] == [int(m.name[1:5]) for m in modules]
    assert {f.number for f in fixes.FIXES} == _line_numbers()  # each fix is some line's
    assert fixes.REGISTRY.fixes is fixes.FIXES
    assert fixes.discover().fixes == fixes.FIXES  # the same module objects, found again
    for fix in fixes.FIXES:
        for form in fix.runtime_forms("1.2.0"):
            module = inspect.getmodule(form.build)
            assert module is not None
            assert module.__name__.startswith(f"overlay.fixes.f{fix.number:04d}_")


def test_discovery_finds_modules_by_name_and_refuses_misnamed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "toypkg"
    package.mkdir()
    (package / "__init__.py").touch()
    (package / "helpers.py").write_text("X = 1\n", encoding="utf-8")  # not a fix module
    (package / "f0099_toy_answer_is_42.py").write_bytes(toy_fix.MODULE_FILE.read_bytes())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        found = fixes.discover("toypkg")
        assert [f.number for f in found.fixes] == [99]
        (package / "f005_short.py").write_text("", encoding="utf-8")
        with pytest.raises(OverlayError, match="not named like a fix module"):
            fixes.discover("toypkg")
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "toypkg"]:
            del sys.modules[name]


def test_from_modules_checks_names_numbers_and_uniqueness() -> None:
    toy = toy_fix.load_module()
    assert fixes.from_modules([toy]).by_number(99) is toy.FIX
    five = toy.FIX
    cases: list[tuple[list[ModuleType], str]] = [
        ([_module("toys.f0006_wrong_number", five)], "declares fix 99"),
        ([_module("toys.fix_five", five)], "not named like a fix module"),
        ([_module("toys.F0099_upper", five)], "not named like a fix module"),
        ([_module("toys.f0099_nothing", None)], "defines no FIX"),
        ([toy, toy_fix.load_module("f0099_twice")], "two modules declare fix 99"),
    ]
    for modules, message in cases:
        with pytest.raises(OverlayError, match=message):
            fixes.from_modules(modules)
    numbers = [f.number for f in fixes.from_modules([toy, *reversed(_real_modules())]).fixes]
    assert numbers == [*(f.number for f in fixes.FIXES), 99]  # ascending, whatever the order


# --- lookups and claims --------------------------------------------------------------------


def test_lookups_by_number_and_patch() -> None:
    registry = _toy_registry()
    assert registry.by_number(99).title == "the answer is 42"
    assert registry.by_patch("0099-toy-answer-is-42") is registry.by_number(99)
    assert registry.by_patch("0099-toy-answer-is-42.patch") is registry.by_number(99)
    assert registry.by_patch("0099-renamed-on-another-line.patch") is registry.by_number(99)
    assert registry.by_patch("0098-other.patch") is None
    assert registry.by_patch("other.patch") is None
    with pytest.raises(OverlayError) as info:
        registry.by_number(98)
    numbers = ", ".join(str(f.number) for f in registry.fixes)
    assert (info.value.found, info.value.expected) == ("98", numbers)
    assert fixes.by_number(3) is fixes.REGISTRY.by_number(3)
    assert fixes.by_patch(f"{fixes.FIXES[1].number:04d}-any-name") is fixes.FIXES[1]


def test_a_claim_holds_for_the_release_it_was_measured_on() -> None:
    registry = _toy_registry()
    toy = registry.by_number(99)
    assert [t.release for t in toy.triggers] == ["9.9.0"]
    for version in ("9.9.0", "9.9.0+armfix.1b5e", None):
        assert [(f.number, t.case) for f, t in registry.triggers_of("toy_answer", version)] == [
            (99, "toy_answer")
        ], version
    for version in ("9.10.0", "9.9.1", "9.9", "not a version"):
        assert registry.triggers_of("toy_answer", version) == [], version
    assert Trigger("c", Effect.FIXED, "w").applies_to("1.2.0")  # no release: every release
    # the real claims, as measured
    one = fixes.by_number(1)
    assert {t.release for t in one.triggers} == {"1.2.0", "1.5.1"}
    assert [f.number for f, _ in fixes.triggers_of("conv_relu_cat_mixed_qparams", "1.5.1")] == [3]
    assert [t.release for _, t in fixes.triggers_of("conv_relu_cat_mixed_qparams")] == [
        "1.2.0",
        "1.5.1",
    ]


def test_the_claim_listing_names_each_claim_by_its_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from overlay import cli

    code = cli.main(
        ["equivalence", "--list", "--stock-python", sys.executable, "--out", str(tmp_path)]
    )
    listed = capsys.readouterr().out.splitlines()
    assert code == 0
    for fix in fixes.FIXES:
        for case in {t.case for t in fix.triggers}:
            (line,) = [entry for entry in listed if entry.startswith(f"case  {case}:")]
            assert f" by patch {fix.number}" in line, line


# The checker a copied checkout runs once the toy fix is added to it (printed as JSON).
_NEW_FIX_CHECK = """
import json
from pathlib import Path
from overlay import fixes, lines, runtime
from overlay.equivalence import corpus
from overlay.equivalence.controller import scheduler
import docs_tables

root = Path("patches")
before = corpus.PROBE_RUNS["Answer.value.toy"]()
applied = runtime.Runtime(fixes.REGISTRY, root).apply([99])
print(json.dumps({
    "problems": fixes.REGISTRY.problems(lines.all_lines(root)),
    "case": [corpus.info("toy_answer").spec, corpus.FIX_CASES["toy_answer"].info.name],
    "probes": [[p.name, p.fix] for p in corpus.PROBES if p.fix == 99],
    "answers": [before, applied, corpus.PROBE_RUNS["Answer.value.toy"]()],
    "carried": [scheduler.carried_fixes(root / line) for line in ("9.9.0", "9.10.0")],
    "row": [r for r in docs_tables.table(fixes.REGISTRY, lines.all_lines(root)).splitlines()
            if r.startswith("| 99 |")],
}))
"""


def _files(root: Path) -> dict[str, bytes]:
    found = {}
    for folder in ("overlay", "patches"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def test_a_new_fix_is_its_module_and_its_line_data(tmp_path: Path) -> None:
    """Adding a fix changes its module under overlay/fixes/ and its lines under patches/
    (with what the tools write there); every consumer then takes it from those alone.

    The copy of the checkout gets only the toy fix's files: the registry, its validation
    against the lines, the corpus (its case and probe), the worker's probe, the runtime
    patch, the run's attribution, the equivalence listing and in-place `status` find it.
    (The generated table of docs/fixes.md is then stale until its tool rewrites it.)
    """
    checkout = tmp_path / "checkout"
    for folder in ("overlay", "patches"):
        shutil.copytree(ROOT / folder, checkout / folder, ignore=shutil.ignore_patterns("__pyc*"))
    (checkout / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    before = _files(checkout)
    module = checkout / "overlay" / "fixes" / toy_fix.MODULE_FILE.name
    module.write_bytes(toy_fix.MODULE_FILE.read_bytes())
    toy_fix.write_lines(checkout / "patches")
    after = _files(checkout)
    changed = {name for name in after if before.get(name) != after[name]} | (
        before.keys() - after.keys()
    )
    assert changed == {
        f"overlay/fixes/{toy_fix.MODULE_FILE.name}",
        *(f"patches/{line}/{name}" for line in toy_fix.LINES for name in toy_fix.LINE_FILES),
    }
    site = toy_fix.install_package(tmp_path / "site", "9.9.0")
    paths = [str(checkout), str(site), str(ROOT / "tests")]  # the copy's overlay, its tables
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop(lines.PATCHES_ENV, None)

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            check=False,
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    found = json.loads(run("-c", _NEW_FIX_CHECK))
    assert found == {
        "problems": [],
        "case": ["TOSA-1.0+FP", "toy_answer"],
        "probes": [["Answer.value.toy", 99]],
        "answers": [41, [99], 42],
        "carried": [[99], [99]],
        "row": [
            "| 99 | the answer is 42 | - | - | carried (`0099-toy-answer-is-42`); runtime"
            " `Answer.value` | carried (`0099-toy-answer-is-42`); diff only | 9.9.0: toy_answer"
            " (changed) | - |"
        ],
    }
    listed = run("-m", "overlay", "equivalence", "--list", "--out", str(tmp_path / "out"))
    assert "case  toy_answer: TOSA-1.0+FP fp [fast] claims changed by patch 99\n" in listed
    assert "probe Answer.value.toy: fix 99: the answer\n" in listed
    status = run("-m", "overlay", "status", "--series-only", "--line", "9.9.0")
    assert "  99. 0099-toy-answer-is-42.patch: The answer is 42\n" in status


def test_divergences_are_declared_per_line_as_rules_naming_their_fix() -> None:
    for line in ("1.2.0", "1.5.1"):
        rules = fixes.divergences(line)
        assert fixes.divergences(f"{line}+armfix.abc") == rules
        declared = [(f.number, d.name) for f in fixes.FIXES for d in f.divergences.get(line, ())]
        assert [(r.fix, r.name) for r in rules] == declared
    assert fixes.divergences() == fixes.divergences("1.2.0") + fixes.divergences("1.5.1")
    # the verdict reads them for the release it ran: an observation one declares on 1.2.0
    # is undeclared on 1.5.1
    seed = next(d for d in fixes.divergences("1.2.0") if d.direction is Direction.EQUIVALENT)
    assert not isinstance(seed.other, str)
    signature = seed.other[0]
    seen = ItemResult(RunStatus.FAIL, error=ErrorInfo(signature.type, signature.contains, P))
    good = ItemResult(RunStatus.OK, value=[1])
    results = {PathId.STOCK: good, PathId.RUNTIME: seen, PathId.PATCHED: good}
    info = ProbeInfo("any_probe", "a probe")
    assert decide(info.item, info, results, None, version="1.2.0").rule == seed
    assert decide(info.item, info, results, None, version="1.5.1").bc is BC.UNDECLARED


def test_carried_by_reads_the_series(tmp_path: Path) -> None:
    registry = _toy_registry()
    root = toy_fix.write_lines(tmp_path)
    (nine, ten) = lines.all_lines(root)
    assert [f.number for f in registry.carried_by(nine)] == [99]
    for real in lines.all_lines(ROOT / "patches"):
        numbers = [p.number for p in load_series(real.directory).patches]
        assert [f.number for f in registry.carried_by(real)] == numbers
    (root / "9.9.0" / "series").write_text("0004-x.patch\n0042-unknown.patch\n", encoding="utf-8")
    with pytest.raises(OverlayError) as info:
        registry.carried_by(nine)
    assert info.value.found == (
        "line 9.9.0 lists 0042-unknown.patch, which has no fix module"
        " (overlay/fixes/f0042_<slug>.py)"
    )
    assert ten.name == "9.10.0"


# --- validation against the lines ----------------------------------------------------------


def test_the_checkout_lines_and_the_registry_agree() -> None:
    checkout = lines.all_lines(ROOT / "patches")
    assert checkout, "no release line under patches/"
    assert fixes.REGISTRY.problems(checkout) == []
    for line in checkout:
        series = load_series(line.directory)
        for patch in series.patches:
            fix = fixes.REGISTRY.by_number(int(patch.name[:4]))
            assert set(patch.targets) <= set(fix.repo_paths), patch.name
            for form in fix.runtime_forms(line.name):
                assert form.repo_path in patch.targets, patch.name


def _problems(tmp_path: Path, **change: object) -> list[str]:
    toy_fix.write_line(toy_fix.write_lines(tmp_path), "9.11.0", patches=())  # carries nothing
    return _toy_registry(**change).problems(lines.all_lines(tmp_path))


def test_validation_accepts_the_toy_fix(tmp_path: Path) -> None:
    assert _problems(tmp_path) == []


_FORM = RuntimeForm(toy_fix.REPO_PATH, "Answer", "value", lambda m, o: o)
_DIFF = DiffOnly("a constant")
_SEED = fixes.by_number(3).divergences["1.2.0"][0]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"runtime": {"9.9.0": _FORM}},
            "fix 99 is carried by line 9.10.0 but has no runtime form for it and no DiffOnly"
            " reason",
        ),
        (
            {"runtime": {"9.9.0": _FORM, "9.10.0": _DIFF, "9.8.0": _FORM}},
            "fix 99: 9.8.0 names neither a line nor a release with claims",
        ),
        (
            {"runtime": {"9.9.0": _FORM, "9.10.0": _DIFF, "9.11.0": _FORM}},
            "fix 99: has a runtime form or divergences for line 9.11.0, whose series does not"
            " carry it",
        ),
        (
            {"runtime": {"9.9.0": _FORM, "9.10.0": _DIFF}, "claims": {"~=9.9": ()}},
            "fix 99: '~=9.9' is not a release such as 1.2.0",
        ),
        (
            {"runtime": {"9.9.0": _FORM, "9.10.0": DiffOnly(" ")}},
            "fix 99: DiffOnly on 9.10.0 gives no reason",
        ),
        (
            {"runtime": {"9.9.0": _FORM, "9.10.0": _DIFF}, "repo_paths": ("backends/x.py",)},
            "fix 99: the 9.9.0 runtime form replaces a function in backends/toy/answer.py, which"
            " is not in its repo_paths",
        ),
        (
            {"divergences": {"9.9.0": (_SEED,)}},
            "divergence 'stale-grouped-transpose-check' is declared by fixes 3 and 99",
        ),
        (
            {"divergences": {"9.12.0": (dataclasses.replace(_SEED, name="x"),)}},
            "fix 99: 9.12.0 names neither a line nor a release with claims",
        ),
    ],
)
def test_validation_names_each_inconsistency(
    tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    assert _problems(tmp_path, **change) == [problem]


def test_validation_names_a_patch_without_a_fix_module(tmp_path: Path) -> None:
    toy_fix.write_line(toy_fix.write_lines(tmp_path), "9.11.0", (toy_fix.PATCH, "0098-x.patch"))
    registry = _toy_registry()
    assert registry.problems(lines.all_lines(tmp_path)) == [
        "line 9.11.0 lists 0098-x.patch, which has no fix module (overlay/fixes/f0098_<slug>.py)",
        "fix 99 is carried by line 9.11.0 but has no runtime form for it and no DiffOnly reason",
    ]


def _replacement(build: Callable[..., object]) -> tuple[str, list[ast.FunctionDef | ast.ClassDef]]:
    """Return the name a builder returns and what it defines to say what it does.

    ``return f`` or ``return staticmethod(f)``: the function ``f``; ``return TABLE`` after
    ``TABLE = {**original, key: Check}``: the classes the table's new entries hold.
    """
    (builder,) = ast.parse(inspect.getsource(build)).body
    assert isinstance(builder, ast.FunctionDef)
    returned = builder.body[-1]
    assert isinstance(returned, ast.Return) and returned.value is not None
    value = returned.value
    if isinstance(value, ast.Call):
        value = value.args[0]
    assert isinstance(value, ast.Name)
    named = [
        n
        for n in builder.body
        if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == value.id
    ]
    if named:
        return value.id, named
    (table,) = [
        n.value
        for n in builder.body
        if isinstance(n, ast.Assign)
        and [t.id for t in n.targets if isinstance(t, ast.Name)] == [value.id]
    ]
    assert isinstance(table, ast.Dict)
    entries = {
        v.id for k, v in zip(table.keys, table.values, strict=True) if k and isinstance(v, ast.Name)
    }
    classes: list[ast.FunctionDef | ast.ClassDef] = [
        n for n in builder.body if isinstance(n, ast.ClassDef) and n.name in entries
    ]
    assert classes, value.id
    return value.id, classes


def test_every_replacement_says_what_it_meets_and_what_it_becomes() -> None:
    registry = _toy_registry()
    built = [f for fix in registry.fixes for line in fix.runtime for f in fix.runtime_forms(line)]
    for line in lines.all_lines(ROOT / "patches"):  # every carried fix has its forms here
        for fix in registry.carried_by(line):
            assert set(fix.runtime_forms(line.name)) <= set(built)
            assert fix.runtime_forms(line.name) or isinstance(fix.runtime[line.name], DiffOnly)
    for form in built:
        name, defined = _replacement(form.build)
        for replacement in defined:
            doc = ast.get_docstring(replacement) or ""
            assert "Example:" in doc and "Becomes:" in doc, form.qualname
        assert name == form.attribute, form.qualname
        assert inspect.getdoc(form.build), form.qualname


# --- the docs table ------------------------------------------------------------------------


def test_the_docs_table_lists_the_toy_fix(tmp_path: Path) -> None:
    registry = _toy_registry()
    checkout = lines.all_lines(ROOT / "patches")
    added = lines.all_lines(toy_fix.write_lines(tmp_path))
    table = docs_tables.table(registry, (*checkout, *added))
    rows = table.splitlines()
    assert rows[0].startswith("| fix | what it fixes | 1.2.0 | 1.5.1 | 9.9.0 | 9.10.0 | claims |")
    toy = next(r for r in rows if r.startswith("| 99 |"))
    assert toy == (
        "| 99 | the answer is 42 | - | - | carried (`0099-toy-answer-is-42`); runtime"
        " `Answer.value` | carried (`0099-toy-answer-is-42`); diff only | 9.9.0: toy_answer"
        " (changed) | - |"
    )
    one = next(r for r in rows if r.startswith("| 1 |"))
    names = [
        p.name.removesuffix(".patch")
        for c in checkout
        for p in load_series(c.directory).patches
        if p.number == 1
    ]
    forms = [f.qualname for c in checkout for f in fixes.by_number(1).runtime_forms(c.name)]
    assert (
        f"| carried (`{names[0]}`); runtime `{forms[0]}` |"
        f" ported (`{names[1]}`); runtime `{forms[1]}` | - | - |"
    ) in one
    four = next(r for r in rows if r.startswith("| 4 |"))
    assert (
        "| carried (`0004-distinct-output-transpose-slots`); runtime"
        " `ToTosaMemoryFormatPass.insert_input_transpose` | dropped | - |" in four
    )
    assert "1.5.1: grid_warp_a16w8_vgf (fixed)" in one
    three = next(r for r in rows if r.startswith("| 3 |"))
    assert three.endswith("| 1.2.0: stale-grouped-transpose-check |")


def test_the_lines_table_gives_each_lines_evidence() -> None:
    every = lines.all_lines(ROOT / "patches")
    rows = docs_tables.evidence_table(fixes.REGISTRY, every).splitlines()
    assert rows[0] == "| line | fix | status | trigger cases | upstream test | upstream |"
    by_key = {tuple(r.split(" | ")[:2]): r for r in rows[2:]}
    assert by_key[("| 1.5.1", "4")].startswith(
        "| 1.5.1 | 4 | dropped | equal_constant_outputs_channels_last: stock right | - |"
    )
    assert "(PR #18866)" in by_key[("| 1.5.1", "4")]
    ported = evidence.load(ROOT / "patches" / "1.5.1")
    assert ported is not None
    conv = next(p for p in ported.patches if p.patch.startswith("0003-"))
    assert by_key[("| 1.5.1", "3")].startswith(
        "| 1.5.1 | 3 | ported | conv_relu_cat_mixed_qparams: stock wrong, patched right"
    )
    assert by_key[("| 1.5.1", "3")].endswith(f" | {conv.upstream_test} | - |")
    assert by_key[("| 1.2.0", "5")].startswith("| 1.2.0 | 5 | backported |")
    assert "cherry-pick of 9c7fba0e9b55; in 1.4.0" in by_key[("| 1.2.0", "5")]
    assert "| 1.2.0 | 2 | carried | factory_op_output (changed) |" in by_key[("| 1.2.0", "2")]


@pytest.mark.parametrize(
    ("page", "update"),
    [("docs/fixes.md", docs_tables.update), ("README.md", docs_tables.update_readme)],
)
def test_the_committed_tables_are_current(page: str, update: Callable[..., str]) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    wanted = update(text, fixes.REGISTRY, lines.all_lines(ROOT / "patches"))
    assert text == wanted, (
        f"{page}'s table of fixes is stale: regenerate both with"
        " PYTHONPATH=. python tests/docs_tables.py"
    )


def test_lines_lists_every_line_with_its_fixes_by_number_and_its_locks() -> None:
    all_lines = lines.all_lines(ROOT / "patches")
    found = overview.summaries(fixes.REGISTRY, all_lines)
    assert [s.name for s in found] == [line.name for line in reversed(all_lines)]
    assert [s.default for s in found] == [True] + [False] * (len(found) - 1)
    for summary, line in zip(found, reversed(all_lines), strict=True):
        assert summary.torch == line.pins.runtime["torch"]
        carried = {f.number for f in fixes.REGISTRY.carried_by(line)}
        held = {f.number for f in summary.fixes if f.status is not Status.DROPPED}
        assert held == carried  # every fix the series lists, and only those
        locks = {p.stem for p in (line.directory / "locks").glob("*.txt")}
        assert set(summary.locks) == locks and locks <= {w.tag for w in line.pins.wheels}
    newest = found[0]
    dropped = {f.number for f in newest.fixes if f.status is Status.DROPPED}
    recorded = evidence.load(all_lines[-1].directory)
    assert recorded is not None
    assert dropped == {
        int(p.patch[:4]) for p in recorded.patches if p.status is Status.DROPPED
    }  # from evidence.toml


def test_update_needs_both_markers() -> None:
    registry = fixes.REGISTRY
    with pytest.raises(OverlayError, match="no generated table"):
        docs_tables.update(f"text\n{docs_tables.BEGIN}\n", registry, ())
    begin, end = docs_tables.BEGIN, docs_tables.END
    updated = docs_tables.update(f"a\n{begin}\nXYZZY\n{end}\nb\n", registry, ())
    assert updated.startswith(f"a\n{begin}\n| fix | what it fixes | claims |")
    assert updated.endswith(f"{end}\nb\n") and "XYZZY" not in updated


def test_a_fix_and_its_divergence_are_plain_data() -> None:
    divergence = Divergence("d", Direction.EQUIVALENT, (ErrorSignature("E", "m"),), "why")
    assert dataclasses.replace(divergence, name="e").name == "e"
    assert divergence.condition == "any item; (b) raises E ('m')"
    assert fixes.by_number(2).runtime_forms("1.5.1") == ()
    assert DiffOnly("x").text == "diff only: x"
    assert "claims" not in repr(fixes.by_number(1))  # a short repr in error messages


def test_what_the_newest_line_sends_is_declared_in_upstreams_words() -> None:
    """Gate rule 4's declarations: each fix the newest line carries names its symptom (the
    issue's title) and each case it claims there its model (a numbers row names no corpus
    case); every PR its patch's description cites is declared, with its author's handle."""
    newest = lines.all_lines(ROOT / "patches")[-1]
    for patch in load_series(newest.directory).patches:
        fix = fixes.by_patch(patch.name)
        assert fix is not None and fix.upstream.symptom, patch.name
        assert [t.case for t in fix.claims[newest.name] if not corpus.info(t.case).model] == []
        cited = {int(n) for n in re.findall(r"#(\d+)", patch.header["Description"])}
        numbers = [pr.number for pr in fix.upstream.cited]
        assert cited <= set(numbers) and len(numbers) == len(set(numbers)), patch.name
        for pr in fix.upstream.cited:
            assert pr.title and re.fullmatch(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*", pr.author), pr


# --- fix 8's runtime form ships the shaders its patch creates --------------------------------


def test_fix_8_reads_each_file_its_patch_creates_as_the_applier_does() -> None:
    from overlay.fixes import f0008_vgf_nearest_grid_sample_ties as nearest
    from overlay.text.applier import transform
    from overlay.text.series import load_series, parse_patch

    patch = load_series(ROOT / "patches" / "1.5.1").of({nearest.NUMBER})[0]
    shipped = {f"{nearest.SHADERS}/{s}{nearest.BINARY}" for s in nearest.NEAREST.values()}
    assert shipped <= set(patch.creates)
    for path in patch.creates:
        assert nearest.created_text(patch.text, path).encode() == transform((patch,), path, None)
    header = "Description: x\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    bare = parse_patch("0008-x.patch", header + created_diff("s/a.txt", "one\ntwo"))
    assert nearest.created_text(bare.text, "s/a.txt") == "one\ntwo"  # no newline at the end
    with pytest.raises(OverlayError, match=r"does not create s/b\.txt"):
        nearest.created_text(
            bare.text.replace("--- /dev/null\n+++ b/s/a.txt", "--- a/s/b.txt\n+++ b/s/b.txt"),
            "s/b.txt",
        )


def test_fix_8_picks_the_nearest_shaders_from_the_cache_for_nearest_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from overlay.fixes import f0008_vgf_nearest_grid_sample_ties as nearest

    monkeypatch.setenv(lines.PATCHES_ENV, str(ROOT / "patches" / "1.5.1"))
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path))
    module = ModuleType("grid_sampler")
    module.GRID_SAMPLER_2D_SAMPLER_INT8_VK_FORMAT = "int8"  # type: ignore[attr-defined]

    def original(sampler_vk_format: str | None, align_corners: bool) -> str:
        return f"stock {sampler_vk_format} {align_corners}"

    chosen = nearest.sample_nearest_at_pytorchs_texel.build(module, original)

    def payload(interpolation_mode: int, fmt: str, align_corners: bool) -> str:
        return str(chosen(fmt, align_corners=align_corners))  # as 1.5.1 calls it: no mode

    assert payload(0, "int8", True) == "stock int8 True"
    for (int8, corners), stem in nearest.NEAREST.items():
        path = Path(payload(1, "int8" if int8 else "float", corners))
        assert path.parent == tmp_path / "runtime" / "fix-8" and path.name.endswith(
            stem + ".spirv.b64"
        )
    assert chosen("float", align_corners=False, interpolation_mode=0) == "stock float False"
    assert len(list((tmp_path / "runtime" / "fix-8").iterdir())) == 4
