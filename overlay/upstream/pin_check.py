"""Runtime pins checked: each candidate pin set in a fresh stock env of a release (the
quantized out-variant kernels load, one corpus case lowers), every attempt kept."""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import _process, codec
from overlay._git import git
from overlay.envs import release_venvs
from overlay.errors import OverlayError, UpstreamError
from overlay.upstream import behaviour
from overlay.upstream.results import PinAttempt
from overlay.upstream.upstream_pins import UpstreamPins

Progress = Callable[[str], None]
LOWERING_CHECK_CASE = "conv_relu_int8"  # a lowering every supported release must do (VGF too)
LOWERING_CHECK_FILE = "overlay-lowering-check.json"
PROBE = Path(__file__).with_name("kernel_probe.py")
# The out variants executorch's to_executorch (exir's ToOutVarPass) swaps the Arm
# pipeline's quantize/dequantize nodes for: executorch 1.5.1's backends/arm/test/
# runner_utils.py lists them (_QDQ_BACKWARD_COMPAT_OVERLOADS) and its TOSA INT tests fail
# with "Missing out variants: {'quantized_decomposed::quantize_per_tensor', ...}" without.
OUT_VARIANTS = (
    "quantized_decomposed::quantize_per_tensor.out",
    "quantized_decomposed::dequantize_per_tensor.out",
    "quantized_decomposed::quantize_per_channel.out",
    "quantized_decomposed::dequantize_per_channel.out",
)


@dataclass(frozen=True)
class PinCandidate:
    """A runtime pin set to try, and where each value came from."""

    runtime: dict[str, str]
    origin: str


@dataclass(frozen=True)
class KernelProbe:
    """What :mod:`kernel_probe` printed in a release env."""

    torch: str
    missing: tuple[str, ...]
    load_error: str = ""


def upstream_torch_pin(clone: Path | None, commit: str | None, version: str) -> tuple[str, str]:
    """Return (torch version, where it was read) from upstream's ``torch_pin.py`` at the
    release's tag, else at its wheel's commit (never main's: it may be a later release's)."""
    if clone is None:
        return "", ""
    for ref, label in ((f"v{version}", f"tag v{version}"), (commit, "the release commit")):
        if not ref:
            continue
        try:
            text = git(clone, "show", f"{ref}:torch_pin.py")
        except OverlayError:
            continue
        for line in text.splitlines():
            if line.startswith("TORCH_VERSION"):
                return line.split("=", 1)[1].strip().strip("'\""), f"torch_pin.py at {label}"
    return "", ""


def confirm_runtime(
    shared: UpstreamPins,
    version: str,
    candidates: Sequence[PinCandidate],
    *,
    envs_root: Path | None,
    log_dir: Path,
    progress: Progress,
) -> tuple[dict[str, str], list[PinAttempt], release_venvs.Env]:
    """Try runtime pin sets until a stock env of the release passes :func:`check_env`."""
    attempts: list[PinAttempt] = []
    for candidate in candidates:
        started = time.perf_counter()
        env = None
        try:
            pins = (f"{k}=={v}" for k, v in candidate.runtime.items())
            requirements = (f"executorch=={version}", *pins, *shared.test_requirements)
            spec = release_venvs.env_contents(
                f"executorch-{version}-stock", shared.python, requirements
            )  # what the release's stock env holds: the candidate and the test tools
            env = release_venvs.ensure(spec, envs_root, progress=progress)
            detail = check_env(env, version, log_dir)
        except OverlayError as exc:
            detail = exc.message + (f": {exc.found}" if exc.found else "")
        ok = env is not None and detail == ""
        seconds = time.perf_counter() - started
        attempts.append(
            PinAttempt(dict(candidate.runtime), ok, detail or "ok", seconds, candidate.origin)
        )
        progress(f"pins {candidate.origin}: {'ok' if ok else ' '.join(detail.split())[:300]}")
        if ok and env is not None:
            return dict(candidate.runtime), attempts, env
    raise UpstreamError(
        f"no runtime pins run executorch {version}'s tests",
        expected="one candidate whose stock env registers the quantized out-variant kernels"
        " and lowers a conv for TOSA and VGF",
        found="; ".join(f"{a.runtime.get('torch')}: {a.detail[:200]}" for a in attempts),
        hint="pass --torch VERSION (upstream's torch_pin.py at the release tag), or"
        " --upstream CLONE so it is read from there, or record it under [torch] in"
        " patches/upstream.toml",
    )


def check_env(env: release_venvs.Env, version: str, log_dir: Path) -> str:
    """Check a stock env runs what the release's tests need; return "" or the failure (the
    answer kept in the env folder)."""
    saved = env.folder / LOWERING_CHECK_FILE
    asked = SavedCheck(LOWERING_CHECK_CASE, OUT_VARIANTS, env.contents.salt, "")
    with contextlib.suppress(OSError, codec.CodecError):
        found = codec.loads(SavedCheck, saved.read_text(encoding="utf-8"), LOWERING_CHECK_FILE)
        if replace(found, detail="") == asked:
            return found.detail
    detail = kernel_problem(probe_kernels(env.python)) or _lowering_check(env, version, log_dir)
    saved.write_text(codec.dumps(replace(asked, detail=detail)) + "\n", encoding="utf-8")
    return detail


@dataclass(frozen=True)
class SavedCheck:
    """An env check's answer, kept in the env folder, and what it answered for."""

    case: str  # the lowering case
    kernels: tuple[str, ...]
    env: str  # the env spec's key (its requirements)
    detail: str  # "" or why the env cannot run the tests


def probe_kernels(python: Path) -> KernelProbe:
    """Run :mod:`kernel_probe` in the env of ``python``."""
    command = [str(python), str(PROBE), *OUT_VARIANTS]

    def refuse(found: str) -> UpstreamError:
        return UpstreamError(
            "the kernel probe failed in the release env",
            expected="one JSON line",
            found=found,
            hint=f"run: {shlex.join(command)}",
        )

    return _process.json_line(KernelProbe, command, refuse, timeout=600)


def kernel_problem(probe: KernelProbe) -> str:
    """Return why the env cannot run the release's quantized tests ("" when it can)."""
    if not probe.missing:
        return ""
    why = f" ({probe.load_error})" if probe.load_error else ""
    return (
        f"kernels: {', '.join(probe.missing)} not registered with torch {probe.torch}{why}:"
        " the release's tests cannot run to_executorch (Missing out variants)"
    )


def _lowering_check(env: release_venvs.Env, version: str, log_dir: Path) -> str:
    sides = behaviour.run_envs({"stock": str(env.python)}, [LOWERING_CHECK_CASE], out_dir=log_dir)
    result = sides["stock"][1][LOWERING_CHECK_CASE]
    if not result.ok:
        return result.error.first_line if result.error else "the lowering failed"
    if result.vgf is not None and result.vgf.error is not None:
        message = result.vgf.error.message.strip()
        said = [line.strip()[-200:] for line in message.splitlines()
                if "GLIBC" in line or "not found" in line or "rejects" in line]  # fmt: skip
        return "VGF: " + (said or [message.splitlines()[0][:200] if message else "failed"])[0]
    if result.numerics_error is not None:
        return "numerics: " + result.numerics_error.first_line
    return ""
