"""Run VGF delegates on the CPU: ML SDK scenario runner + emulation layer over lavapipe.

Example: the layer package ships both layer manifests in one folder. The Vulkan loader
of Debian 12 (1.3.239) orders ``VK_INSTANCE_LAYERS`` by manifest discovery, not by the
variable, and puts the tensor layer above the graph layer, so device creation fails with
"ML Emulation Layer for Vulkan requires extension: VK_ARM_tensors". Becomes: each
manifest is copied into its own folder (graph first on ``VK_LAYER_PATH``) with an
absolute library path, which fixes the order on old and new loaders alike.

A run executes each graph once per emulator and inputs; other calls read the outputs kept
in ``vgf-runs/`` (docs/equivalence.md, "The emulator is one oracle").
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from glob import glob
from pathlib import Path
from typing import Any

from overlay import _mutex
from overlay._files import write_text_atomic
from overlay._hashing import sha256_file

GRAPH_LAYER = "VK_LAYER_ML_Graph_Emulation"
TENSOR_LAYER = "VK_LAYER_ML_Tensor_Emulation"
ICD_GLOBS = ("/usr/share/vulkan/icd.d/lvp_icd*.json", "/etc/vulkan/icd.d/lvp_icd*.json")
RUN_TIMEOUT_S = 300.0
RUNS = "vgf-runs"  # the executions kept for a run, beside its layer folder
TOOLS = ("ai-ml-sdk-scenario-runner", "ai-ml-sdk-vgf-library", "ai-ml-emulation-layer-for-vulkan")

# Vulkan tensor formats in scenario templates -> numpy dtype names.
FORMATS = {
    "VK_FORMAT_R8_BOOL_ARM": "bool",
    "VK_FORMAT_R8_SINT": "int8",
    "VK_FORMAT_R8_UINT": "uint8",
    "VK_FORMAT_R16_SINT": "int16",
    "VK_FORMAT_R32_SINT": "int32",
    "VK_FORMAT_R64_SINT": "int64",
    "VK_FORMAT_R16_SFLOAT": "float16",
    "VK_FORMAT_R32_SFLOAT": "float32",
}


class VgfRunError(RuntimeError):
    """The scenario runner could not run a VGF graph (a tool, the driver or the graph)."""


class VgfNotRunnableError(VgfRunError):
    """The graph needs what the emulation here cannot give (a custom SPIR-V shader module)."""


# Lines of the scenario runner's log start with the wall clock; errors are compared across
# paths, so the time is dropped.
_LOG_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ ")
SHADER_MISSING = "Cannot open SPIR-V shader file"
SHADER_TEMPLATE = "TEMPLATE_PATH_SHADER_SPIRV_"


@dataclass(frozen=True)
class Emulation:
    """Where the tools are, and the environment that loads the emulation layers."""

    scenario_runner: str
    vgf_dump: str
    env: dict[str, str]
    identity: str = ""  # what answers a call (:func:`identity`): in every kept run's key
    runs: Path | None = None  # where executions are kept for the run (None: not kept)


def lavapipe_icd() -> str | None:
    """Return Mesa's lavapipe ICD manifest (None: not installed)."""
    for pattern in ICD_GLOBS:
        found = sorted(glob(pattern))
        if found:
            return found[0]
    return None


def _layer_folders(deploy: Path, folder: Path) -> list[Path]:
    """Write one manifest per folder, graph layer first, with absolute library paths."""
    manifests = deploy / "share" / "vulkan" / "explicit_layer.d"
    result = []
    for index, stem in enumerate(("VkLayer_Graph", "VkLayer_Tensor")):
        data = json.loads((manifests / f"{stem}.json").read_text(encoding="utf-8"))
        library = data["layer"]["library_path"]
        data["layer"]["library_path"] = str((deploy / "lib" / Path(library).name).resolve())
        target = folder / f"{index}-{stem}"
        target.mkdir(parents=True, exist_ok=True)
        # The workers of a run share the folder: a Vulkan loader reading a manifest another
        # worker is rewriting must never see it torn (an unloadable layer, a failed VGF run).
        write_text_atomic(target / f"{stem}.json", json.dumps(data, indent=2))
        result.append(target)
    return result


def find_emulation(folder: Path) -> Emulation | str:
    """Return the tools and environment, or the reason VGF graphs cannot run here."""
    runner = shutil.which("scenario_runner") or shutil.which("scenario-runner")
    dump = shutil.which("vgf_dump")
    try:
        import emulation_layer  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        deploy = None
    else:
        deploy = Path(emulation_layer.__file__).resolve().parent / "deploy"
    icd = lavapipe_icd()
    missing = [
        what
        for what, found in (
            ("scenario_runner (pip install ai-ml-sdk-scenario-runner)", runner),
            ("vgf_dump (pip install ai-ml-sdk-vgf-library)", dump),
            ("the emulation layer (pip install ai-ml-emulation-layer-for-vulkan)", deploy),
            ("lavapipe (apt-get install mesa-vulkan-drivers)", icd),
        )
        if not found
    ]
    if missing:
        return "not installed: " + ", ".join(missing)
    assert runner and dump and deploy and icd
    tools = identity(deploy, icd)  # each path's venv may bring other tools: its own layers
    env = {**os.environ, **layer_env(deploy, folder / tools[:16], icd)}
    return Emulation(runner, dump, env, tools, folder.parent / RUNS)


@functools.cache
def identity(deploy: Path, icd: str) -> str:
    """Return a digest of what answers a VGF call: the tools' versions, the layer libraries,
    the driver's manifest and library (their bytes: two venvs of one lock share it)."""
    digest = hashlib.sha256()
    for name in TOOLS:
        try:
            digest.update(f"{name} {importlib.metadata.version(name)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name} -\n".encode())
    library = json.loads(Path(icd).read_text(encoding="utf-8"))["ICD"]["library_path"]
    driver = [Path(icd), *([Path(library)] if Path(library).is_absolute() else [])]
    for path in [*sorted((deploy / "lib").glob("*.so*")), *driver]:
        digest.update(f"{path.name} {sha256_file(path)}\n".encode())
    return digest.hexdigest()


def layer_env(deploy: Path, folder: Path, icd: str) -> dict[str, str]:
    """Return the variables that load the emulation layers of ``deploy`` over lavapipe."""
    layers = _layer_folders(deploy, folder)
    return {
        "VK_LAYER_PATH": os.pathsep.join(str(p) for p in layers),
        "VK_INSTANCE_LAYERS": f"{GRAPH_LAYER}:{TENSOR_LAYER}",
        "VK_ICD_FILENAMES": icd,  # loaders before 1.3.234
        "VK_DRIVER_FILES": icd,
        "LD_LIBRARY_PATH": os.pathsep.join(
            p for p in (str(deploy / "lib"), os.environ.get("LD_LIBRARY_PATH", "")) if p
        ),
    }


def _run(command: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
    try:
        done = subprocess.run(
            command,
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise VgfRunError(f"{what} did not finish in {RUN_TIMEOUT_S:.0f} s") from exc
    output = (done.stdout or "") + (done.stderr or "")
    if done.returncode != 0:
        lines = [_LOG_TIME.sub("", line) for line in output.splitlines()]
        errors = [line for line in lines if "ERROR" in line or "Error]" in line]
        tail = "\n".join(errors[-5:] or lines[-5:])
        if SHADER_MISSING in output:
            raise VgfNotRunnableError(
                f"{what} cannot run this VGF here: it holds a custom SPIR-V shader module"
                f" (a TOSA custom op such as the grid sampler's), which the emulation layer"
                f" does not load ({tail})"
            )
        raise VgfRunError(f"{what} failed (exit {done.returncode}): {tail}")
    return output


def _vgf_dump(emulation: Emulation, folder: Path, *args: str) -> None:
    """Run ``vgf_dump`` on the folder's ``graph.vgf``."""
    _run([emulation.vgf_dump, "-i", "graph.vgf", *args], emulation.env, folder, "vgf_dump")


def run_vgf(emulation: Emulation, vgf: bytes, inputs: list[Any], folder: Path) -> list[Any]:
    """Run one VGF graph on numpy inputs; return its outputs as numpy arrays."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.vgf").write_bytes(vgf)
    _vgf_dump(emulation, folder, "-o", "scenario.json", "--scenario-template")
    scenario = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    tensors = [r["tensor"] for r in scenario["resources"] if "tensor" in r]
    sources = [t for t in tensors if "src" in t and str(t["src"]).startswith("TEMPLATE")]
    sinks = [t for t in tensors if "dst" in t]
    if len(sources) != len(inputs):
        raise VgfRunError(
            f"the VGF graph takes {len(sources)} inputs, the call passes {len(inputs)}"
        )
    for index, (tensor, value) in enumerate(zip(sources, inputs, strict=True)):
        dtype = FORMATS.get(tensor["format"])
        if dtype is None:
            raise VgfRunError(f"input {index}: no numpy type for {tensor['format']}")
        data = _to_layout(np.asarray(value).astype(dtype), tuple(tensor["dims"]))
        tensor["src"] = f"input_{index}.npy"
        np.save(folder / tensor["src"], data)
    for index, tensor in enumerate(sinks):
        tensor["dst"] = f"output_{index}.npy"
    _dump_shaders(emulation, scenario, folder)
    (folder / "run.json").write_text(json.dumps(scenario, indent=1), encoding="utf-8")
    _run(
        [emulation.scenario_runner, "--scenario", "run.json", "--output", str(folder)],
        emulation.env,
        folder,
        "scenario-runner",
    )
    return [np.load(folder / t["dst"]) for t in sinks]


def _dump_shaders(emulation: Emulation, scenario: dict[str, Any], folder: Path) -> None:
    """Write each SPIR-V module the graph embeds (a custom op's shader) where the scenario
    reads it.

    Example: the 1.5.1 grid sampler's VGF, whose scenario template names its shader
    ``TEMPLATE_PATH_SHADER_SPIRV_1``.
    Becomes: ``vgf_dump --dump-spirv 1`` into ``shader_1.spv``, named in the scenario.
    """
    for resource in scenario["resources"]:
        shader = resource.get("shader")
        source = str(shader.get("src", "")) if isinstance(shader, dict) else ""
        if not source.startswith(SHADER_TEMPLATE):
            continue
        assert isinstance(shader, dict)
        index = source.removeprefix(SHADER_TEMPLATE)
        shader["src"] = f"shader_{index}.spv"
        _vgf_dump(emulation, folder, "-o", shader["src"], "--dump-spirv", index)


def _to_layout(data: Any, dims: tuple[int, ...]) -> Any:
    """Return ``data`` in the shape the graph declares (NCHW as is, or NHWC)."""
    if tuple(data.shape) == dims:
        return data
    if data.ndim == 4 and tuple(data.transpose(0, 2, 3, 1).shape) == dims:
        return data.transpose(0, 2, 3, 1).copy()
    if data.size == math.prod(dims):
        return data.reshape(dims)
    raise VgfRunError(f"input of shape {tuple(data.shape)} does not fit the graph's {dims}")


def run_kept(emulation: Emulation, vgf: bytes, inputs: list[Any], folder: Path) -> list[Any]:
    """Run one VGF graph (:func:`run_vgf`), or read the outputs of the run's execution of the
    same bytes on the same inputs by the same emulator (one execution at a time per key)."""
    import numpy as np

    if emulation.runs is None:
        return run_vgf(emulation, vgf, inputs, folder)
    digest = hashlib.sha256(f"{emulation.identity} {len(vgf)} {len(inputs)}\n".encode() + vgf)
    for value in inputs:
        array = np.asarray(value)
        data = np.ascontiguousarray(array).tobytes()
        digest.update(f"\n{array.dtype.str} {array.shape} {len(data)}\n".encode() + data)
    key = digest.hexdigest()
    kept, lock = emulation.runs / key, emulation.runs / f"{key}.lock"
    wait = 2 * RUN_TIMEOUT_S  # the holder's vgf_dump and scenario runner
    held = _mutex.acquire(lock, timeout=wait)
    if held is None:  # the same words on every path
        raise VgfRunError(f"the same VGF graph ran in another worker for over {wait:.0f} s")
    try:
        if not kept.is_dir():  # run it; every caller, this one too, reads what was kept
            scratch = emulation.runs / f".{key}-{os.getpid()}"
            shutil.rmtree(scratch, ignore_errors=True)  # a dead worker's of the same pid
            scratch.mkdir()
            try:
                outputs = run_vgf(emulation, vgf, inputs, folder)
            except VgfRunError as exc:  # kept too: a later call fails alike, without a rerun
                (scratch / "error").write_text(f"{type(exc).__name__}\n{exc}", encoding="utf-8")
            else:
                for index, output in enumerate(outputs):
                    np.save(scratch / f"output_{index}.npy", output)
            scratch.rename(kept)
    finally:
        _mutex.release(lock, held, remove_folder=False)
    if (kept / "error").is_file():
        kind, _, message = (kept / "error").read_text(encoding="utf-8").partition("\n")
        error = VgfNotRunnableError if kind == VgfNotRunnableError.__name__ else VgfRunError
        raise error(message)
    count = len(list(kept.glob("output_*.npy")))
    return [np.load(kept / f"output_{index}.npy") for index in range(count)]


def run_program(edge: Any, inputs: tuple[Any, ...], emulation: Emulation) -> tuple[Any, ...]:
    """Run a VGF-lowered program: CPU ops in torch, each delegate (``executorch_call_delegate``
    of a VgfBackend module, caught by a TorchFunctionMode) on the emulation."""
    import numpy as np
    import torch
    from torch.overrides import TorchFunctionMode

    class VgfDispatch(TorchFunctionMode):  # type: ignore[misc]
        def __init__(self, folder: Path) -> None:
            super().__init__()
            self.folder, self.calls = folder, 0

        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func is not torch._higher_order_ops.executorch_call_delegate:
                return func(*args, **kwargs)
            lowered, inputs = args[0], args[1:]
            if lowered.backend_id != "VgfBackend":
                raise VgfRunError(f"cannot run a {lowered.backend_id} delegate here")
            self.calls += 1
            arrays = [t.detach().contiguous().cpu().numpy() for t in inputs]
            vgf = bytes(lowered.processed_bytes)
            out = run_kept(emulation, vgf, arrays, self.folder / f"call{self.calls}")
            nodes = lowered.original_module.graph.output_node().args[0]
            results = []
            for array, node in zip(out, nodes, strict=True):
                want, data = node.meta["val"], np.asarray(array)
                shape = tuple(want.shape)
                if tuple(data.shape) != shape:  # NHWC back to NCHW, or a reshape
                    nhwc = (shape[0], shape[2], shape[3], shape[1]) if len(shape) == 4 else ()
                    from_nhwc = data.ndim == 4 and tuple(data.shape) == nhwc
                    data = data.transpose(0, 3, 1, 2) if from_nhwc else data.reshape(shape)
                results.append(torch.from_numpy(data.copy()).to(want.dtype))
            return tuple(results)

    with tempfile.TemporaryDirectory(prefix="overlay-vgf-") as tmp:
        mode = VgfDispatch(Path(tmp))
        program = edge.exported_program().module()
        with mode:
            out = program(*inputs)
        if mode.calls == 0:
            raise VgfRunError("the program has no VGF delegate to run")
    return tuple(out) if isinstance(out, list | tuple) else (out,)
