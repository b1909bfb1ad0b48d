"""Equivalence runs with real workers (torch): the fast corpus passes, injected faults fail.

The stock path is this interpreter (a venv with stock executorch 1.2.0). The patched path is
this interpreter plus a hardlinked copy of its executorch package with the series applied
(``applier.transform``), put first on PYTHONPATH: the same bytes the build installs.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from overlay.equivalence.controller import orchestrator
from overlay.equivalence.controller.options import Options
from overlay.equivalence.protocol import CaseInfo, PathId, RunStatus, TargetState
from overlay.equivalence.render.text import render_table
from overlay.equivalence.verdict import AB, BC, Observation, Quality
from overlay.equivalence.worker import vgf_run
from overlay.errors import EquivalenceError, EquivalenceInputError
from overlay.text.applier import transform
from overlay.text.series import Series, load_series

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seed" / "arm_backend_monkey_patch.py"


def _stock_package() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs stock executorch in this interpreter (run through nox)")
    return Path(next(iter(spec.submodule_search_locations)))


def _patched_copy(series: Series, folder: Path) -> Path:
    package = _stock_package()
    target = folder / "executorch"
    shutil.copytree(package, target, copy_function=os.link)
    for repo_path in series.targets():
        path = target / repo_path
        data = transform(series.patches, repo_path, path.read_bytes())
        path.unlink()  # break the hardlink before writing
        path.write_bytes(data)
    return folder


def _options(tmp_path: Path, series: Series, **overrides: object) -> Options:
    options = Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        fast=True,
        out_dir=tmp_path / "out",
        patches_dir=ROOT / "patches" / "1.2.0",
        pythonpath={PathId.PATCHED: str(_patched_copy(series, tmp_path / "patched"))},
    )
    return dataclasses.replace(options, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(ROOT / "patches" / "1.2.0")


def test_fast_corpus_is_equivalent_and_claims_reproduce(tmp_path: Path, series: Series) -> None:
    result = orchestrator.run(_options(tmp_path, series))
    assert result.failures == [], render_table(result)
    verdicts = {str(v.item): v for v in result.verdicts}
    regression = verdicts["case:conv_a16w8_int16"]
    assert (regression.ab, regression.fix) == (AB.REGRESSION, 1)
    mixed = verdicts["case:conv_relu_cat_mixed_qparams"]
    assert (mixed.ab, mixed.fix) == (AB.FIXED, 3)
    assert mixed.results[PathId.STOCK].status is RunStatus.FAIL
    slots = verdicts["case:equal_constant_outputs_channels_last"]
    assert (slots.ab, slots.fix) == (AB.FIXED, 4)
    assert verdicts["case:conv_relu_int8"].ab is AB.SAME
    assert all(v.bc in (BC.AGREE, BC.DECLARED) for v in result.verdicts)
    # the seed's deployment (zoo, in the fast subset): fix 1 changes the VGF bytes only
    grid = verdicts["case:zoo_grid_warp_int16_grid_intfp16"]
    assert (grid.ab, grid.fix, grid.findings) == (AB.CHANGED, 1, ())
    stock_vgf, patched_vgf = grid.results[PathId.STOCK].vgf, grid.results[PathId.RUNTIME].vgf
    assert stock_vgf is not None and patched_vgf is not None
    assert stock_vgf.payloads != patched_vgf.payloads
    if vgf_run._lavapipe_icd() is not None:  # VGF executed: bit-identical int16 outputs
        assert stock_vgf.numerics is not None and patched_vgf.numerics is not None
        assert stock_vgf.numerics.key == patched_vgf.numerics.key
    # issue 9-10's VGF grid warp meets 1.2.0's int16 tanh: wrong on every path, as declared
    warp = verdicts["case:grid_warp_a16w8_vgf"]
    assert [(f.target, f.quality) for f in warp.findings] == [
        ("tosa", Quality.WRONG),
        ("vgf", Quality.WRONG),
    ]
    assert (warp.ab, warp.expectation_problem) == (AB.SAME, None)
    table = render_table(result)
    assert "stock OK, patched FAIL: TosaValueError" in table


def test_runtime_patch_missing_one_fix_is_caught(tmp_path: Path, series: Series) -> None:
    partial = tmp_path / "partial_patch.py"
    partial.write_text(
        "from overlay import runtime\n\n\ndef apply() -> None:\n    runtime.apply([1, 2, 3])\n",
        encoding="utf-8",
    )
    options = _options(
        tmp_path,
        series,
        runtime_patch=f"{partial}:apply",
        only=("equal_constant_outputs_channels_last",),
        attribute=False,
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    assert verdict.bc is BC.UNDECLARED and Observation.NUMERICS in verdict.bc_diffs
    assert result.failures


def test_patched_env_with_one_diff_reverted_is_caught(tmp_path: Path, series: Series) -> None:
    without_3 = dataclasses.replace(
        series, patches=tuple(p for p in series.patches if not p.name.startswith("0003"))
    )
    options = dataclasses.replace(
        _options(tmp_path, without_3),
        only=("conv_relu_cat_mixed_qparams",),
        attribute=False,
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    assert verdict.bc is BC.UNDECLARED and verdict.bc_diffs[0] is Observation.STATUS
    error = verdict.results[PathId.PATCHED].error
    assert error is not None and error.type == "ValueError"


def test_cli_exits_non_zero_on_undeclared_divergence(tmp_path: Path) -> None:
    from overlay import cli

    # Path (c) is plain stock here: a "patched build" that lacks every diff.
    code = cli.main(
        [
            "equivalence",
            "--stock-python",
            sys.executable,
            "--patched-python",
            sys.executable,
            "--case",
            "equal_constant_outputs_channels_last",
            "--no-attribution",
            "--out",
            str(tmp_path / "reports"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--quiet",
        ]
    )
    assert code == EquivalenceError.exit_code
    markdown = (tmp_path / "reports" / "equivalence.md").read_text(encoding="utf-8")
    assert "UNDECLARED" in markdown


@pytest.mark.skipif(not SEED.is_file(), reason=f"seed monkey-patch not found at {SEED}")
def test_seed_file_gives_same_verdicts_plus_declared(tmp_path: Path, series: Series) -> None:
    seed = f"{SEED}:apply_arm_backend_monkey_patch"
    result = orchestrator.run(_options(tmp_path, series, runtime_patch=seed))
    assert result.failures == [], render_table(result)
    declared = {str(v.item): v.declared for v in result.verdicts if v.bc is BC.DECLARED}
    assert declared == {
        "probe:RewriteConvPass.grouped_transposed_fp": "seed-stale-grouped-transpose-check"
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


def test_user_models_file_runs_on_all_paths(tmp_path: Path, series: Series) -> None:
    models = tmp_path / "my_models.py"
    models.write_text(USER_MODELS, encoding="utf-8")
    options = _options(
        tmp_path, series, models=str(models), only=("user_two_convs",), attribute=False
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    assert isinstance(verdict.info, CaseInfo) and verdict.info.source == "my_models.py"
    assert all(r.ok for r in verdict.results.values()), render_table(result)
    assert any(line.startswith("delegate[0]") for line in verdict.results[PathId.PATCHED].graph)
    assert result.failures == []


def test_ethos_u_lowering_reports_command_streams_and_vela_estimates(
    tmp_path: Path, series: Series
) -> None:
    pytest.importorskip("ethosu.vela")
    models = tmp_path / "ethos_models.py"
    text = USER_MODELS.replace('"per_channel": False,', '"per_channel": False, "ethos_u": True,')
    models.write_text(text, encoding="utf-8")
    options = _options(
        tmp_path, series, models=str(models), only=("user_two_convs",), attribute=False
    )
    result = orchestrator.run(options)
    (verdict,) = result.verdicts
    stock = verdict.results[PathId.STOCK].ethos_u
    assert [e.target for e in stock] == ["ethos-u55-128", "ethos-u85-256"]
    for ethos in stock:
        assert ethos.state is TargetState.COMPARED, ethos.error
        assert len(ethos.payloads) == len(ethos.estimates) == 1
        assert ethos.estimates[0].cycles_total > 0 and ethos.estimates[0].macs > 0
    assert verdict.bc is BC.AGREE and result.failures == []
    assert "ethos-u85-256" in render_table(result)


def test_invalid_user_models_file_is_refused(tmp_path: Path, series: Series) -> None:
    models = tmp_path / "bad_models.py"
    models.write_text(
        "CASES = {'x': {'module': 1, 'inputs': [], 'spec': 'INT', 'quantize': 'q'}}\n",
        encoding="utf-8",
    )
    options = _options(tmp_path, series, models=str(models))
    with pytest.raises(EquivalenceInputError, match="CASES cannot run") as info:  # read, not run
        orchestrator.run(options)
    assert "'spec' must be a TOSA spec string" in (info.value.found or "")
    assert not (options.log_dir / "worker-a.log").exists()  # refused before any worker


def test_a_models_file_wrong_only_when_run_is_refused_by_the_worker(
    tmp_path: Path, series: Series
) -> None:
    models = tmp_path / "late_models.py"
    models.write_text(
        "import torch\n\nCASES = {}\nCASES.update({'x': {'module': torch.nn.ReLU,"
        " 'inputs': ([1.0],), 'spec': 'TOSA-1.0+INT', 'quantize': 'a8w8'}})\n",
        encoding="utf-8",
    )
    options = _options(tmp_path, series, models=str(models))
    with pytest.raises(EquivalenceInputError, match="could not start: an input is wrong") as info:
        orchestrator.run(options)
    assert "x: every element of 'inputs' must be a torch.Tensor" in (info.value.found or "")
