"""Runtime pins for a new release: torch from what the release requires, kernels checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from overlay._git import git
from overlay.envs.venvs import Contents
from overlay.errors import UpstreamError
from overlay.lines import pins
from overlay.upstream import pin_check, upstream_pins
from overlay.upstream.pin_check import (
    OUT_VARIANTS,
    KernelProbe,
    kernel_problem,
    probe_kernels,
    upstream_torch_pin,
)
from overlay.upstream.retarget.runtime_pins import (
    required_torch,
    runtime_candidates,
    torch_candidates,
)

ROOT = Path(__file__).resolve().parent.parent
OLD = pins.load(ROOT / "patches" / "1.2.0")
SHARED = upstream_pins.for_series(ROOT / "patches" / "1.2.0")
# executorch 1.5.1's Requires-Dist names no torch; 1.4.1's and 1.2.0's do.
REQ_151 = [Requirement("torchao<0.19,>=0.18.0"), Requirement("pytorch-tokenizers>=1.5.0")]
REQ_141 = [Requirement("torch>=2.13.0a0"), Requirement("torchao>=0.18.0")]
UNDEFINED = (
    "executorch/kernels/quantized/libquantized_ops_aot_lib.so: undefined symbol:"
    " _ZNK2at10TensorBase14const_data_ptrIaEEPKT_v"
)


def test_required_torch_reads_the_release_metadata() -> None:
    assert required_torch(REQ_141) == "2.13.0"
    assert required_torch([Requirement("torch==2.11.*")]) == "2.11.0"
    assert required_torch([Requirement("torch>=2.10.0")]) == "2.10.0"
    assert required_torch(REQ_151) == ""
    assert required_torch([Requirement('torch>=2.9; platform_system == "Darwin"')]) == ""


def test_torch_comes_from_the_release_before_the_line(tmp_path: Path) -> None:
    found = torch_candidates(
        "1.4.1", given=("2.14.0",), requirements=REQ_141, clone_pin="2.13.0", shared=SHARED
    )
    assert found == {"2.14.0": "--torch", "2.13.0": "executorch 1.4.1's Requires-Dist"}
    # 1.5.1's wheel names no torch: a clone's torch_pin.py, else upstream.toml's record.
    from_clone = torch_candidates(
        "1.5.1", given=(), requirements=REQ_151, clone_pin="2.12.0", shared=SHARED
    )
    assert next(iter(from_clone.items())) == ("2.12.0", "upstream's torch_pin.py")
    recorded = torch_candidates(
        "1.5.1", given=(), requirements=REQ_151, clone_pin="", shared=SHARED
    )
    assert recorded == {"2.13.0": "[torch] in upstream.toml"}
    assert torch_candidates("9.9.9", given=(), requirements=[], clone_pin="", shared=SHARED) == {}
    # The line's own torch comes last, and only where the release allows it.
    candidates = runtime_candidates(OLD, REQ_151, list(recorded), recorded)
    assert [c.runtime["torch"] for c in candidates][:1] == ["2.13.0"]
    assert candidates[-1].runtime["torch"] == "2.11.0"
    assert candidates[0].origin.startswith("torch 2.13.0 ([torch] in upstream.toml)")
    ruled_out = runtime_candidates(OLD, REQ_141, ["2.13.0"])
    assert {c.runtime["torch"] for c in ruled_out} == {"2.13.0"}  # 2.11 is below >=2.13.0a0


def test_runtime_candidates_start_from_the_release_metadata() -> None:
    requirements = [
        Requirement("torchao<0.19,>=0.18.0"),
        Requirement('tosa-tools==2026.5.0; extra == "vgf"'),
        Requirement('ai_ml_sdk_model_converter==0.10.0; extra == "vgf"'),
        Requirement('ai_ml_emulation_layer_for_vulkan==0.10.0; extra == "vgf"'),
        Requirement('ethos-u-vela==5.1.0; extra == "ethos-u"'),
    ]
    found = runtime_candidates(OLD, requirements, ["2.13.0"])
    assert found[0].runtime == {
        "torch": "2.13.0",
        "torchao": "0.18.0",
        "tosa-tools": "2026.5.0",
        "ai-ml-sdk-model-converter": "0.10.0",
        # the tools that run VGF files stay one ML SDK release, as pinned; Ethos-U as pinned
        "ai-ml-sdk-scenario-runner": "0.11.0",
        "ai-ml-sdk-vgf-library": "0.11.0",
        "ai-ml-emulation-layer-for-vulkan": "0.11.0",
        "ethos-u-vela": "5.1.0",
    }
    # Then each tool back at its pinned version alone, then all pinned, then the pinned torch.
    tools = [(c.runtime["tosa-tools"], c.runtime["ai-ml-sdk-model-converter"]) for c in found]
    assert tools[:4] == [
        ("2026.5.0", "0.10.0"),
        ("2026.2.1", "0.10.0"),
        ("2026.5.0", "0.11.0"),
        ("2026.2.1", "0.11.0"),
    ]
    assert [c.runtime["torch"] for c in found] == ["2.13.0"] * 4 + ["2.11.0"] * 4
    assert len({tuple(c.runtime.items()) for c in found}) == len(found)
    bumped = runtime_candidates(OLD, [Requirement("torchao>=0.19")], [])
    assert bumped[0].runtime["torchao"] == "0.19"


def test_upstream_torch_pin_is_read_at_the_release_tag_only(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "-q", "-b", "main")
    (clone / "torch_pin.py").write_text('TORCH_VERSION = "2.13.0"\n')
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "release")
    git(clone, "tag", "v1.5.1")
    (clone / "torch_pin.py").write_text('TORCH_VERSION = "2.15.0"\n')
    git(clone, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "main moves on")
    assert upstream_torch_pin(clone, None, "1.5.1") == ("2.13.0", "torch_pin.py at tag v1.5.1")
    head = git(clone, "rev-parse", "HEAD").strip()
    assert upstream_torch_pin(clone, head, "1.6.0") == (
        "2.15.0",
        "torch_pin.py at the release commit",
    )
    assert upstream_torch_pin(clone, None, "1.6.0") == ("", "")  # never main's pin
    assert upstream_torch_pin(None, head, "1.5.1") == ("", "")


def test_kernel_problem_names_the_missing_out_variants() -> None:
    assert kernel_problem(KernelProbe("2.13.0+cu130", ())) == ""
    problem = kernel_problem(KernelProbe("2.11.0+cu130", OUT_VARIANTS[:2], UNDEFINED))
    assert problem.startswith(
        "kernels: quantized_decomposed::quantize_per_tensor.out,"
        " quantized_decomposed::dequantize_per_tensor.out not registered with torch 2.11.0+cu130"
    )
    assert "undefined symbol" in problem and "Missing out variants" in problem


def _fake_python(tmp_path: Path, printed: str, code: int = 0) -> Path:
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nimport sys\nprint({printed!r})\nsys.exit({code})\n")
    script.chmod(0o755)
    return script


def test_the_probe_is_decoded_strictly(tmp_path: Path) -> None:
    line = json.dumps({"torch": "2.11.0", "missing": list(OUT_VARIANTS), "load_error": "x"})
    probe = probe_kernels(_fake_python(tmp_path, "noise\n" + line))
    assert probe == KernelProbe("2.11.0", OUT_VARIANTS, "x")
    with pytest.raises(UpstreamError, match="kernel probe failed"):
        probe_kernels(_fake_python(tmp_path, "Traceback: no torch", 1))
    bad = json.dumps({"torch": "2.11.0", "missing": "all"})
    with pytest.raises(Exception, match="malformed data"):
        probe_kernels(_fake_python(tmp_path, bad))


def test_the_probe_script_reports_what_torch_lacks(tmp_path: Path) -> None:
    """Run the real probe against a fake torch that registers only the default overloads."""
    fake = tmp_path / "site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "__version__ = '2.11.0+cpu'\n"
        "class _S:\n    def __init__(self, n):\n        self.overload_name = n\n"
        "class _C:\n    @staticmethod\n    def _jit_get_schemas_for_operator(name):\n"
        "        return [_S(''), _S('out')] if 'dequantize' in name else [_S('')]\n"
    )
    # and a fake executorch whose kernel library does not import, whatever this env holds
    kernels = fake / "executorch" / "kernels" / "quantized"
    kernels.mkdir(parents=True)
    for folder in (fake / "executorch", fake / "executorch" / "kernels"):
        (folder / "__init__.py").write_text("")
    (kernels / "__init__.py").write_text("raise ImportError('no kernels here')\n")
    import subprocess

    done = subprocess.run(
        [sys.executable, str(pin_check.PROBE), *OUT_VARIANTS],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(fake)},
        check=True,
    )
    data = json.loads(done.stdout)
    assert data["torch"] == "2.11.0+cpu"
    assert data["missing"] == [
        "quantized_decomposed::quantize_per_tensor.out",
        "quantized_decomposed::quantize_per_channel.out",
    ]
    assert data["load_error"] == "executorch.kernels.quantized does not import: no kernels here"


def test_confirm_runtime_rejects_a_torch_whose_kernels_do_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.5.1's kernels load with torch 2.13, not 2.11: the pin check tries 2.11 and says why."""
    from overlay.envs import release_venvs

    def ensure(spec: Contents, *_: object, **__: object) -> release_venvs.Env:
        folder = tmp_path / spec.key[:8]
        folder.mkdir(exist_ok=True)
        return release_venvs.Env(folder, spec)

    def probe(python: Path) -> KernelProbe:
        wanted = probed.pop(0).requirements.splitlines()
        torch = next(r for r in wanted if r.startswith("torch=="))
        missing = () if torch == "torch==2.13.0" else OUT_VARIANTS
        return KernelProbe(torch.removeprefix("torch=="), missing, UNDEFINED if missing else "")

    probed: list[Contents] = []
    lowered: list[str] = []

    def ensure_and_note(spec: Contents, *_: object, **__: object) -> release_venvs.Env:
        probed.append(spec)
        return ensure(spec)

    def lower(env: release_venvs.Env, *_: object) -> str:
        lowered.append(env.contents.label)
        return ""

    monkeypatch.setattr(release_venvs, "ensure", ensure_and_note)
    monkeypatch.setattr(pin_check, "probe_kernels", probe)
    monkeypatch.setattr(pin_check, "_lowering_check", lower)
    candidates = runtime_candidates(OLD, REQ_151, ["2.11.0", "2.13.0"])
    runtime, attempts, env = pin_check.confirm_runtime(
        SHARED, "1.5.1", candidates, envs_root=None, log_dir=tmp_path, progress=lambda _: None
    )
    assert runtime["torch"] == "2.13.0" and attempts[-1].ok
    assert [a.runtime["torch"] for a in attempts] == ["2.11.0", "2.13.0"]
    assert attempts[0].detail.startswith("kernels: quantized_decomposed::quantize_per_tensor.out")
    assert lowered == ["executorch-1.5.1-stock"]  # not tried where the kernels are missing
    assert "pytest==8.4.2" in env.contents.requirements.splitlines()  # the stock env runs tests
    cached = pin_check.check_env(env, "1.5.1", tmp_path)  # the answer is kept in the env
    assert cached == "" and len(lowered) == 1
    with pytest.raises(UpstreamError, match=r"no runtime pins run executorch 1\.5\.1's") as info:
        pin_check.confirm_runtime(SHARED, "1.5.1", candidates[:1], envs_root=None,
                                  log_dir=tmp_path, progress=lambda _: None)  # fmt: skip
    assert "[torch] in" in (info.value.hint or "")
    assert "2.11.0: kernels:" in (info.value.found or "")  # the kept answer, not a new probe
