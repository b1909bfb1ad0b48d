"""Equivalence runs with real workers (torch): the fast corpus passes, injected faults fail.

The stock path is this interpreter (a venv with stock executorch at one of the release
lines: the env's line, ``patches/<its version>/``). The patched path is this interpreter
plus a hardlinked copy of its executorch package with that line's series applied
(``applier.transform``), put first on PYTHONPATH: the same bytes the build installs.
Every expectation comes from the line's data: its series, and the claims and declared
divergences its fix modules make for it (:mod:`overlay.fixes`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest
from equivalence_samples import patched_copy, shown
from packaging.version import Version

from overlay import fixes, lines
from overlay.equivalence import corpus
from overlay.equivalence.controller import orchestrator
from overlay.equivalence.controller.options import Options
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.protocol import PathId, TargetState
from overlay.equivalence.verdict import AB, BAD, BC, Verdict
from overlay.errors import EquivalenceError, EquivalenceInputError
from overlay.fixes import Effect, Fix, Trigger
from overlay.items import CaseInfo, ItemId, ItemKind
from overlay.lines import Line
from overlay.text.series import Series, load_series
from overlay.upstream import behaviour

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seed" / "arm_backend_monkey_patch.py"
SEED_LINE = "1.2.0"  # the seed monkey-patch was written against this release


def _stock_package() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs stock executorch in this interpreter (run through nox)")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="module")
def line() -> Line:
    """Return the release line of the installed (stock) executorch."""
    _stock_package()
    return lines.line_for_version(ROOT / "patches", importlib.metadata.version("executorch"))


@pytest.fixture(scope="module")
def series(line: Line) -> Series:
    return load_series(line.directory)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The result cache these tests share: a path one test lowered is not lowered again."""
    return tmp_path_factory.mktemp("results")


def _options(
    tmp_path: Path, line: Line, series: Series, results: Path, **overrides: object
) -> Options:
    options = Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        fast=True,
        out_dir=tmp_path / "out",
        cache_dir=results,
        patches_dir=line.directory,
        pythonpath={
            PathId.PATCHED: str(patched_copy(_stock_package(), series, tmp_path / "patched"))
        },
    )
    return dataclasses.replace(options, **overrides)  # type: ignore[arg-type]


def _claims(line: Line) -> list[tuple[Fix, Trigger]]:
    """Return every (fix, trigger) the fix modules claim for the line's release."""
    return [(fix, trigger) for fix in fixes.FIXES for trigger in fix.claims.get(line.name, ())]


def _fixed_undeclared(line: Line, *, runtime_form: bool = False) -> list[tuple[Fix, Trigger]]:
    """Return the line's FIXED claims of fixes it carries that declare no divergence there.

    There, a path that lacks the fix differs from one that has it, and no rule of the fix
    excuses it: the run must call the divergence UNDECLARED. ``runtime_form``: only fixes
    with one. Only cases judged on TOSA: a VGF case's bug may show on executed VGF alone,
    which needs the emulation layer.
    """
    carried = fixes.carried_by(line)
    return [
        (fix, trigger)
        for fix, trigger in _claims(line)
        if trigger.effect is Effect.FIXED
        and fix in carried
        and not fix.divergences.get(line.name)
        and (fix.runtime_forms(line.name) or not runtime_form)
        and not corpus.info(trigger.case).targets_vgf
    ]


def _cached_first(candidates: list[tuple[Fix, Trigger]]) -> tuple[Fix, Trigger]:
    """Return the last of ``candidates`` on a fast case, else the last: the fast corpus run
    (first in this file) has lowered a fast case on every path into the shared result cache,
    so a run that changes one path lowers only that path again."""
    fast = [(fix, trigger) for fix, trigger in candidates if corpus.info(trigger.case).fast]
    return (fast or candidates)[-1]


def _bad(verdict: Verdict, path: PathId) -> bool:
    """Return True when a target is wrong or fails on ``path`` (one not executed is neither)."""
    return any(q in BAD for q in verdict.targets[path].values())


def test_fast_corpus_is_equivalent_and_claims_reproduce(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    options = _options(tmp_path, line, series, results)
    fast, _ = orchestrator.select(orchestrator.list_items(options), options)
    claimed = [(f, t) for f, t in _claims(line) if ItemId(ItemKind.CASE, t.case) in fast]
    assert claimed, f"no fix claims a fast case on line {line.name}"
    result = orchestrator.run(options)
    table = shown(result)
    assert result.failures == [], table
    verdicts = {v.item: v for v in result.verdicts}
    assert set(verdicts) == set(fast)
    for fix, trigger in claimed:
        verdict = verdicts[ItemId(ItemKind.CASE, trigger.case)]
        # a FIXED claim whose target is not executed here is not checked, not passed: stock
        # fails and patched lowers (UNCHECKED), or both lower to other bytes (CHANGED)
        unchecked = bool(verdict.unchecked) and verdict.ab in (AB.UNCHECKED, AB.CHANGED)
        effect = AB.FIXED if unchecked else verdict.ab
        assert (effect, verdict.fix) == (AB(trigger.effect.value), fix.number), (
            f"fix {fix.number} on {trigger.case}: {trigger.why}\n{table}"
        )
        assert verdict.claim_problem is None
        # (b) and (c) carry the fix: no target wrong or failing
        assert not _bad(verdict, PathId.RUNTIME) and not _bad(verdict, PathId.PATCHED)
        if trigger.effect is Effect.FIXED and not unchecked:  # stock fails or is wrong there
            assert _bad(verdict, PathId.STOCK), table
        if trigger.effect is Effect.CHANGED:  # other bytes, not wrong on any path
            assert not _bad(verdict, PathId.STOCK), table
    claimed_cases = {t.case for _, t in claimed}
    for verdict in result.verdicts:
        assert verdict.bc in (BC.AGREE, BC.DECLARED), (verdict.item, table)
        assert verdict.expectation_problem is None and verdict.claim_problem is None
        if verdict.item.kind is ItemKind.CASE and verdict.item.name not in claimed_cases:
            # no fix claims it on this line: the fixes do not make it right or wrong
            assert verdict.ab in (AB.SAME, AB.CHANGED), (verdict.item, table)


def test_runtime_patch_missing_one_fix_is_caught(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    candidates = _fixed_undeclared(line, runtime_form=True)
    assert candidates, f"line {line.name}: no fix with a runtime form claims a FIXED case"
    missing, trigger = _cached_first(candidates)
    others = [f.number for f in fixes.carried_by(line) if f.runtime_forms(line.name)]
    others.remove(missing.number)
    partial = tmp_path / "partial_patch.py"
    partial.write_text(
        f"from overlay import runtime\n\n\ndef apply() -> None:\n    runtime.apply({others!r})\n",
        encoding="utf-8",
    )
    options = _options(
        tmp_path,
        line,
        series,
        results,
        runtime_patch=f"{partial}:apply",
        only=(trigger.case,),
        attribute=False,
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    table = shown(result)
    assert verdict.bc is BC.UNDECLARED and verdict.bc_diffs, table
    # (b) lacks the fix: broken as stock is, where (c) is right
    assert verdict.targets[PathId.RUNTIME] == verdict.targets[PathId.STOCK], table
    assert _bad(verdict, PathId.RUNTIME) and not _bad(verdict, PathId.PATCHED)
    assert any("undeclared divergence" in f for f in result.failures)


def test_patched_env_with_one_diff_reverted_is_caught(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    candidates = _fixed_undeclared(line)
    assert candidates, f"line {line.name}: no carried fix claims a FIXED case"
    # The series without the fix's patch must still apply: a later patch's context may
    # hold an earlier one's lines (so far every line's fast-case fix can be taken out).
    reverted, trigger = _cached_first(candidates)
    without = series.with_patches(
        tuple(p for p in series.patches if fixes.by_patch(p.name) is not reverted)
    )
    assert len(without.patches) == len(series.patches) - 1
    options = dataclasses.replace(
        _options(tmp_path, line, without, results), only=(trigger.case,), attribute=False
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    table = shown(result)
    assert verdict.bc is BC.UNDECLARED and verdict.bc_diffs, table
    # (c) lacks the diff: broken as stock is, where (b) is right
    assert verdict.targets[PathId.PATCHED] == verdict.targets[PathId.STOCK], table
    assert _bad(verdict, PathId.PATCHED) and not _bad(verdict, PathId.RUNTIME)
    assert result.failures


def test_cli_exits_non_zero_on_undeclared_divergence(
    tmp_path: Path, line: Line, results: Path
) -> None:
    from overlay import cli

    candidates = _fixed_undeclared(line)
    assert candidates, f"line {line.name}: no carried fix claims a FIXED case"
    _, trigger = _cached_first(candidates)
    # Path (c) is plain stock here: a "patched build" that lacks every diff.
    code = cli.main(
        [
            "--patches",
            str(line.directory),
            "equivalence",
            "--stock-python",
            sys.executable,
            "--patched-python",
            sys.executable,
            "--case",
            trigger.case,
            "--no-attribution",
            "--out",
            str(tmp_path / "reports"),
            "--cache-dir",
            str(results),
            "--quiet",
        ]
    )
    assert code == EquivalenceError.exit_code
    markdown = (tmp_path / "reports" / "equivalence.md").read_text(encoding="utf-8")
    assert "UNDECLARED" in markdown and trigger.case in markdown


@pytest.mark.skipif(not SEED.is_file(), reason=f"seed monkey-patch not found at {SEED}")
def test_seed_file_gives_same_verdicts_plus_declared(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    if line.name != SEED_LINE:
        pytest.skip(f"the seed monkey-patch is written for {SEED_LINE}; this env is {line.name}")
    seed = f"{SEED}:apply_arm_backend_monkey_patch"
    result = orchestrator.run(_options(tmp_path, line, series, results, runtime_patch=seed))
    assert result.failures == [], shown(result)
    declared = {str(v.item): v.rule.name for v in result.verdicts if v.rule and v.bc is BC.DECLARED}
    assert declared == {
        "probe:RewriteConvPass.grouped_transposed_fp": "stale-grouped-transpose-check"
    }


USER_MODELS = """
import torch


class TwoConvs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


CASES = {
    "user_two_convs": {
        "module": TwoConvs,
        "inputs": (torch.randn(1, 3, 8, 8),),
        "spec": "TOSA-1.0+INT",
        "quantize": "a8w8",
        "per_channel": False,
    },
}
"""


def _user_two_convs(models: Path, text: str, line: Line, series: Series, results: Path) -> Report:
    """Run the models file ``text`` (written at ``models``) for its case user_two_convs."""
    models.write_text(text, encoding="utf-8")
    options = _options(models.parent, line, series, results, models=str(models),
                       only=("user_two_convs",), attribute=False)  # fmt: skip
    return orchestrator.run(options)


def test_user_models_file_runs_on_all_paths(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    result = _user_two_convs(tmp_path / "my_models.py", USER_MODELS, line, series, results)
    (verdict,) = result.verdicts
    assert isinstance(verdict.info, CaseInfo) and verdict.info.source == "my_models.py"
    assert all(r.ok for r in verdict.results.values()), shown(result)
    assert any(line.startswith("delegate[0]") for line in verdict.results[PathId.PATCHED].graph)
    assert result.failures == []


def test_ethos_u_lowering_reports_command_streams_and_vela_estimates(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    pytest.importorskip("ethosu.vela")
    text = USER_MODELS.replace('"per_channel": False,', '"per_channel": False, "ethos_u": True,')
    result = _user_two_convs(tmp_path / "ethos_models.py", text, line, series, results)
    (verdict,) = result.verdicts
    stock = verdict.results[PathId.STOCK].ethos_u
    assert [e.target for e in stock] == ["ethos-u55-128", "ethos-u85-256"]
    for ethos in stock:
        assert ethos.state is TargetState.COMPARED, ethos.error
        assert len(ethos.payloads) == len(ethos.estimates) == 1
        assert ethos.estimates[0].cycles_total > 0 and ethos.estimates[0].macs > 0
    assert verdict.bc is BC.AGREE and result.failures == []
    assert "ethos-u85-256" in shown(result)


def test_invalid_user_models_file_is_refused(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    models = tmp_path / "bad_models.py"
    models.write_text(
        "CASES = {'x': {'module': 1, 'inputs': [], 'spec': 'INT', 'quantize': 'q'}}\n",
        encoding="utf-8",
    )
    options = _options(tmp_path, line, series, results, models=str(models))
    with pytest.raises(EquivalenceInputError, match="CASES cannot run") as info:  # read, not run
        orchestrator.run(options)
    assert "'spec' must be a TOSA spec string" in (info.value.found or "")
    assert not (options.log_dir / "worker-a.log").exists()  # refused before any worker


def test_a_models_file_wrong_only_when_run_is_refused_by_the_worker(
    tmp_path: Path, line: Line, series: Series, results: Path
) -> None:
    models = tmp_path / "late_models.py"
    models.write_text(
        "import torch\n\nCASES = {}\nCASES.update({'x': {'module': torch.nn.ReLU,"
        " 'inputs': ([1.0],), 'spec': 'TOSA-1.0+INT', 'quantize': 'a8w8'}})\n",
        encoding="utf-8",
    )
    options = _options(tmp_path, line, series, results, models=str(models))
    with pytest.raises(EquivalenceInputError, match="could not start: an input is wrong") as info:
        orchestrator.run(options)
    assert "x: every element of 'inputs' must be a torch.Tensor" in (info.value.found or "")


def test_the_worker_counts_the_tosa_operators_of_a_real_lowering(
    tmp_path: Path, line: Line
) -> None:
    """conv -> conv (default and SNORM config) and conv -> ReLU on TOSA-1.0+INT: a CONV2D and
    a RESCALE per conv, no CLAMP on stock, read from the TOSA flatbuffer of its TOSA delegate
    and, when VGF lowers, from the TOSA its VGF delegate was made of (the same operators)."""
    if line.version < Version("1.5"):
        pytest.skip(f"get_vgf_snorm_quantization_config is new in 1.5; stock here is {line.name}")
    names = [c.name for c in corpus.BYSTANDERS if c.spec == "TOSA-1.0+INT" and "conv" in c.name]
    assert {corpus.info(n).quantize for n in names} == {"a8w8", "a8w8_snorm"}
    _, results = behaviour.run_envs({"stock": sys.executable}, names, out_dir=tmp_path)["stock"]
    for name in names:
        found = results[name]
        assert found.ok, found.error
        convs = name.removeprefix("bystander_").count("conv")  # conv_conv: 2, conv_relu: 1
        assert (found.tosa_ops["CONV2D"], found.tosa_ops["RESCALE"]) == (convs, convs), name
        assert "CLAMP" not in found.tosa_ops, name
        if found.vgf is not None and found.vgf.state is TargetState.COMPARED:
            assert found.vgf.tosa_ops == found.tosa_ops, name
