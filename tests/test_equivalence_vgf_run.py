"""VGF runs (torch-free part): the emulation layer manifests, written whole, graph layer first."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from overlay.equivalence.worker import vgf_run


def test_layer_manifests_are_rewritten_whole_graph_layer_first(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    manifests = deploy / "share" / "vulkan" / "explicit_layer.d"
    manifests.mkdir(parents=True)
    for stem in ("VkLayer_Graph", "VkLayer_Tensor"):
        layer = {"layer": {"name": stem, "library_path": f"../../../lib/lib{stem}.so"}}
        (manifests / f"{stem}.json").write_text(json.dumps(layer), encoding="utf-8")
    folder = tmp_path / "vgf-layers"
    graph = folder / "0-VkLayer_Graph" / "VkLayer_Graph.json"
    vgf_run._layer_folders(deploy, folder)
    torn = 0
    with ThreadPoolExecutor(4) as pool:  # the workers of a run share the folder
        rewrites = pool.map(lambda _: vgf_run._layer_folders(deploy, folder), range(60))
        for _ in range(600):  # a Vulkan loader reading while other workers rewrite
            try:
                json.loads(graph.read_text(encoding="utf-8"))
            except ValueError:
                torn += 1
        found = list(rewrites)
    assert torn == 0
    assert all(f == found[0] for f in found)
    assert [p.name for p in found[0]] == ["0-VkLayer_Graph", "1-VkLayer_Tensor"]
    for path, stem in zip(found[0], ("VkLayer_Graph", "VkLayer_Tensor"), strict=True):
        assert sorted(p.name for p in path.iterdir()) == [f"{stem}.json"]  # no temporary left
        data = json.loads((path / f"{stem}.json").read_text(encoding="utf-8"))
        assert data["layer"]["library_path"] == str(deploy.resolve() / "lib" / f"lib{stem}.so")


def _runner(tmp_path: Path, log: str) -> list[str]:
    script = tmp_path / "runner.py"
    script.write_text(f"import sys\nprint({log!r})\nsys.exit(255)\n", encoding="utf-8")
    return [sys.executable, str(script)]


def test_a_failed_run_drops_the_log_clock_so_paths_compare(tmp_path: Path) -> None:
    log = "2026-12-04 03:26:44,902 [Scenario-Runner] ERROR: no device"
    with pytest.raises(vgf_run.VgfRunError) as info:
        vgf_run._run(_runner(tmp_path, log), {}, tmp_path, "scenario-runner")
    assert (
        str(info.value) == "scenario-runner failed (exit 255): [Scenario-Runner] ERROR: no device"
    )
    assert not isinstance(info.value, vgf_run.VgfNotRunnableError)


def test_a_custom_shader_module_is_not_runnable_here(tmp_path: Path) -> None:
    log = "2026-12-04 03:26:52,287 [Scenario-Runner] ERROR: Cannot open SPIR-V shader file."
    with pytest.raises(vgf_run.VgfNotRunnableError) as info:
        vgf_run._run(_runner(tmp_path, log), {}, tmp_path, "scenario-runner")
    assert "custom SPIR-V shader module" in str(info.value)
    assert "2026-12-04" not in str(info.value)


def test_a_run_that_succeeds_returns_its_output(tmp_path: Path) -> None:
    script = tmp_path / "ok.py"
    script.write_text("print('done')\n", encoding="utf-8")
    assert vgf_run._run([sys.executable, str(script)], {}, tmp_path, "x").strip() == "done"


def test_a_custom_ops_shader_module_is_dumped_where_the_scenario_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "vgf_dump.py"
    dump.write_text(
        "import sys\nargs = sys.argv[1:]\n"
        "out = args[args.index('-o') + 1]\n"
        "open(out, 'w').write(' '.join(args))\n",
        encoding="utf-8",
    )
    scenario: dict[str, Any] = {
        "resources": [
            {"shader": {"src": "TEMPLATE_PATH_SHADER_SPIRV_1", "uid": "shader_1_ref"}},
            {"shader": {"src": "own.spv"}},
            {"tensor": {"src": "TEMPLATE_PATH_TENSOR_INPUT_0"}},
        ]
    }
    emulation = vgf_run.Emulation("runner", sys.executable, {})
    original = vgf_run._run
    calls: list[list[str]] = []

    def run(command: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
        calls.append(command)
        return original([sys.executable, str(dump), *command[1:]], env, cwd, what)

    monkeypatch.setattr(vgf_run, "_run", run)
    vgf_run._dump_shaders(emulation, scenario, tmp_path)
    assert scenario["resources"][0]["shader"]["src"] == "shader_1.spv"
    assert scenario["resources"][1]["shader"]["src"] == "own.spv"
    assert calls == [[sys.executable, "-i", "graph.vgf", "-o", "shader_1.spv", "--dump-spirv", "1"]]
    assert (tmp_path / "shader_1.spv").read_text(encoding="utf-8").endswith("--dump-spirv 1")


# --- executions kept for the run -----------------------------------------------------------


def _counting(monkeypatch: pytest.MonkeyPatch, pause: float = 0.0) -> list[bytes]:
    """Replace the emulator by one that records each graph it runs and returns its inputs + 1."""
    import numpy as np

    executed: list[bytes] = []

    def run(emulation: vgf_run.Emulation, vgf: bytes, inputs: list[Any], folder: Path) -> list[Any]:
        executed.append(vgf)
        time.sleep(pause)
        return [np.asarray(value) + 1 for value in inputs]

    monkeypatch.setattr(vgf_run, "run_vgf", run)
    return executed


@pytest.mark.torch  # numpy
def test_the_same_bytes_on_the_same_inputs_by_the_same_emulator_execute_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    executed = _counting(monkeypatch)
    emulation = vgf_run.Emulation("runner", "dump", {}, "emulator-1", tmp_path / "vgf-runs")
    x = [np.arange(6, dtype=np.int8).reshape(2, 3)]
    first = vgf_run.run_kept(emulation, b"graph", x, tmp_path / "a")
    again = vgf_run.run_kept(emulation, b"graph", [x[0].copy()], tmp_path / "b")
    assert executed == [b"graph"]
    assert [(o.dtype, o.tolist()) for o in again] == [(o.dtype, o.tolist()) for o in first]
    assert again[0].tolist() == [[1, 2, 3], [4, 5, 6]]
    # what differs in the key: the bytes, the inputs' values, type or shape, the emulator
    vgf_run.run_kept(emulation, b"other graph", x, tmp_path / "c")
    vgf_run.run_kept(emulation, b"graph", [x[0] * 2], tmp_path / "d")
    vgf_run.run_kept(emulation, b"graph", [x[0].view(np.uint8)], tmp_path / "e")
    vgf_run.run_kept(emulation, b"graph", [x[0].reshape(3, 2)], tmp_path / "f")
    other = dataclasses.replace(emulation, identity="emulator-2")
    vgf_run.run_kept(other, b"graph", x, tmp_path / "g")
    assert len(executed) == 6
    unkept = dataclasses.replace(emulation, runs=None)
    vgf_run.run_kept(unkept, b"graph", x, tmp_path / "h")
    vgf_run.run_kept(unkept, b"graph", x, tmp_path / "i")
    assert len(executed) == 8


@pytest.mark.torch  # numpy
def test_workers_asking_for_one_execution_at_once_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    executed = _counting(monkeypatch, pause=0.2)
    emulation = vgf_run.Emulation("runner", "dump", {}, "emulator", tmp_path / "vgf-runs")
    x = [np.ones(4, dtype=np.float32)]
    with ThreadPoolExecutor(4) as pool:
        outputs = list(
            pool.map(lambda n: vgf_run.run_kept(emulation, b"g", x, tmp_path / str(n)), range(4))
        )
    assert executed == [b"g"]
    assert all(out[0].tolist() == [2.0] * 4 for out in outputs)


@pytest.mark.torch  # numpy
def test_a_failed_execution_is_kept_and_fails_the_next_call_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    calls: list[bytes] = []

    def run(emulation: vgf_run.Emulation, vgf: bytes, inputs: list[Any], folder: Path) -> list[Any]:
        calls.append(vgf)
        raise vgf_run.VgfNotRunnableError("holds a custom SPIR-V shader module")

    monkeypatch.setattr(vgf_run, "run_vgf", run)
    emulation = vgf_run.Emulation("runner", "dump", {}, "emulator", tmp_path / "vgf-runs")
    for _ in range(2):
        with pytest.raises(vgf_run.VgfNotRunnableError, match=r"^holds a custom SPIR-V"):
            vgf_run.run_kept(emulation, b"g", [np.zeros(2)], tmp_path / "call")
    assert calls == [b"g"]
    assert not list((tmp_path / "vgf-runs").glob(".*"))  # no scratch folder left


@pytest.mark.torch  # numpy
def test_kept_outputs_read_back_with_their_order_type_and_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    outputs = [
        np.array(3.5, dtype=np.float16),
        np.array([[True, False]]),
        np.arange(12, dtype=np.int8).reshape(1, 3, 2, 2),
    ]
    monkeypatch.setattr(vgf_run, "run_vgf", lambda *_: outputs)
    emulation = vgf_run.Emulation("runner", "dump", {}, "emulator", tmp_path / "vgf-runs")
    vgf_run.run_kept(emulation, b"g", [np.array(1.0)], tmp_path / "a")
    read = vgf_run.run_kept(emulation, b"g", [np.array(1.0)], tmp_path / "b")
    assert [(o.dtype, o.shape, o.tolist()) for o in read] == [
        (o.dtype, o.shape, o.tolist()) for o in outputs
    ]


def test_the_identity_is_the_tools_and_drivers_bytes_wherever_they_are(tmp_path: Path) -> None:
    def driver(folder: Path, data: bytes) -> str:  # the machine's: every worker of a run
        folder.mkdir()
        (folder / "libvulkan_lvp.so").write_bytes(data)
        icd = folder / "lvp_icd.json"
        icd.write_text(json.dumps({"ICD": {"library_path": str(folder / "libvulkan_lvp.so")}}))
        return str(icd)

    def layers(folder: Path, data: bytes) -> Path:  # a venv's
        (folder / "deploy" / "lib").mkdir(parents=True)
        (folder / "deploy" / "lib" / "libVkLayer_Graph.so").write_bytes(data)
        return folder / "deploy"

    icd = driver(tmp_path / "mesa", b"driver")
    one = vgf_run.identity(layers(tmp_path / "venv-b", b"layer 1"), icd)
    assert vgf_run.identity(layers(tmp_path / "venv-c", b"layer 1"), icd) == one  # a copy
    assert vgf_run.identity(layers(tmp_path / "venv-d", b"layer 2"), icd) != one
    other = driver(tmp_path / "mesa-2", b"driver 2")
    assert vgf_run.identity(tmp_path / "venv-b" / "deploy", other) != one
