"""The real runner of a worker process: the runtime patch, user models, cases and probes;
an attribution request swaps in single line fixes built on stock's recorded functions.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from overlay import runtime
from overlay.equivalence import corpus, protocol
from overlay.equivalence.corpus import models, user_cases, zoo
from overlay.equivalence.worker import lowering
from overlay.equivalence.worker.observe import graph_text
from overlay.equivalence.worker.serve import InputError, error_info
from overlay.items import CaseInfo, ItemKind


def load_file_module(path: Path) -> Any:
    """Import a file as a real module (importlib + sys.modules) so export can trace it."""
    path = path.resolve()
    name = "overlay_user_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class UserCase:
    """One case of a user's models file."""

    info: CaseInfo
    module: Any
    inputs: tuple[Any, ...]


@dataclass
class TorchRunner:
    """Exports, quantises, lowers and runs cases with torch and executorch."""

    user_cases: dict[str, UserCase] = field(default_factory=dict)
    # fix number -> its line forms with stock's functions (recorded before the runtime patch)
    stock: dict[int, tuple[tuple[runtime.RuntimeFix, Any], ...]] = field(default_factory=dict)

    def init(self, request: protocol.InitRequest) -> protocol.InitReply:
        """Import the Arm backend once (timed), apply the runtime patch, load user models."""
        started = time.perf_counter()
        import executorch.backends.arm.tosa.partitioner  # noqa: F401 - import once, timed

        seconds = time.perf_counter() - started
        self.stock = runtime.DEFAULT.originals()
        if request.runtime_patch:
            target, _, function = request.runtime_patch.partition(":")
            try:
                is_file = target.endswith(".py")
                module = (
                    load_file_module(Path(target)) if is_file else importlib.import_module(target)
                )
                patch = getattr(module, function or "apply_all", None)
                if not callable(patch):
                    raise AttributeError(f"{target} has no function {function or 'apply_all'!r}")
            except (ImportError, AttributeError, SyntaxError) as exc:
                raise InputError(f"--runtime-patch {request.runtime_patch}: {exc}") from exc
            patch()
        if request.models:
            self._load_models(Path(request.models))
        return protocol.InitReply(
            python=sys.executable,
            executorch=importlib.metadata.version("executorch"),
            torch=str(torch.__version__),
            import_seconds=seconds,
            runtime_fixes_applied=tuple(
                f.number for f in runtime.FIXES if runtime.is_applied(f.number)
            ),
        )

    def _load_models(self, path: Path) -> None:
        """Import the models file under the corpus seed and keep its checked cases."""
        torch.manual_seed(corpus.SEED)  # inputs made at import time must match on every path
        try:
            module = load_file_module(path)
        except Exception as exc:
            raise InputError(
                f"--models {path}: importing it raised {type(exc).__name__}: {exc}"
            ) from exc
        cases = getattr(module, "CASES", None)
        problems = user_cases.validate_cases(cases, origin=path.name)
        if isinstance(cases, dict):
            for name, entry in cases.items():
                inputs = entry.get("inputs", ()) if isinstance(entry, dict) else ()
                if isinstance(inputs, tuple) and not all(
                    isinstance(t, torch.Tensor) for t in inputs
                ):
                    problems.append(f"{name}: every element of 'inputs' must be a torch.Tensor")
        if problems:
            raise InputError(f"invalid models file {path.name}:\n" + "\n".join(problems))
        assert isinstance(cases, dict)
        for name, entry in cases.items():
            info = user_cases.case_info(name, entry, path)
            self.user_cases[name] = UserCase(info, entry["module"], tuple(entry["inputs"]))

    def cases(self) -> protocol.ListReply:
        """Return the corpus plus the user's cases, and the probes."""
        infos = (*corpus.ALL_CASES, *(c.info for c in self.user_cases.values()))
        return protocol.ListReply(cases=tuple(infos), probes=corpus.PROBES)

    def run(self, request: protocol.RunRequest) -> protocol.ItemResult:
        """Run one case or probe, with the line forms of ``request.fixes`` just for it."""
        missing = [n for n in request.fixes if n not in self.stock]
        if missing:
            raise ValueError(f"no runtime form of fix(es) {missing} on this worker's line")
        with runtime.swapped(form for n in request.fixes for form in self.stock[n]):
            if request.item.kind is ItemKind.PROBE:
                return run_probe(request.item.name)
            name = request.item.name
            info = self.user_cases[name].info if name in self.user_cases else corpus.info(name)
            return lowering.run_case(info, lambda: self._build(name), keep_bytes=request.keep_bytes)

    def _build(self, name: str) -> tuple[Any, tuple[Any, ...]]:
        """Return a case's (module, inputs), made under the corpus seed."""
        torch.manual_seed(corpus.SEED)
        if name in self.user_cases:
            user = self.user_cases[name]
            module = user.module
            return (module if isinstance(module, torch.nn.Module) else module()), user.inputs
        if name in corpus.ZOO_NETWORKS:
            return zoo.NETWORKS[corpus.ZOO_NETWORKS[name]]()
        if name in corpus.FIX_CASES:
            return corpus.FIX_CASES[name].build()
        return models.BUILDERS[name]()


def run_probe(name: str) -> protocol.ItemResult:
    """Run one probe; a raised exception is the observation."""
    started = time.perf_counter()
    try:
        if name not in corpus.PROBE_RUNS:
            raise KeyError(f"no probe {name!r}; known: {', '.join(sorted(corpus.PROBE_RUNS))}")
        value = corpus.PROBE_RUNS[name]()
        if isinstance(value, torch.fx.Graph):
            value = graph_text(value)
    except Exception as exc:
        return protocol.ItemResult(
            status=protocol.RunStatus.FAIL,
            error=error_info(exc, protocol.Stage.PROBE),
            seconds=time.perf_counter() - started,
        )
    return protocol.ItemResult(
        status=protocol.RunStatus.OK, value=value, seconds=time.perf_counter() - started
    )
