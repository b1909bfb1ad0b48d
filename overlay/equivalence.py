"""Prove, case by case, that the diff-patched executorch behaves like stock + runtime patch.

Three paths, one long-lived worker process each (overlay.worker), run in parallel:
(a) stock executorch, (b) stock + a runtime patch, (c) the diff-patched build. (b) and (c)
must agree everywhere except the declared divergences below; every (a)/(b) difference is
attributed to one patch by re-running the case on (a) with that single runtime fix.
Everything here except the worker processes is torch-free.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from overlay import runtime
from overlay.corpus import CaseInfo
from overlay.errors import EquivalenceError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUNTIME_PATCH = "overlay.runtime:apply_all"
PATHS = ("a", "b", "c")
PATH_TITLES = {
    "a": "stock",
    "b": "stock + runtime patch",
    "c": "diff-patched build",
}
WRONG_RELATIVE = 0.05  # a delegate output further than 5% of the reference's range is wrong
WRONG_ABSOLUTE = 1e-3


@dataclass(frozen=True)
class DeclaredDivergence:
    """A known, accepted (b)/(c) difference: where, the exact observation, and why."""

    id: str
    item: str  # "case:NAME" or "probe:NAME"
    b_error_type: str
    b_error_contains: str
    reason: str

    def matches(self, item: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> bool:
        """Return True when (b) fails exactly as declared on this item and (c) does not fail."""
        error = b.get("error") or {}
        return (
            item == self.item
            and b.get("status") == "fail"
            and error.get("type") == self.b_error_type
            and self.b_error_contains in str(error.get("message", ""))
            and c.get("status") == "ok"
        )


# The one place divergences are declared. Each is shown in every report.
DECLARED_DIVERGENCES: tuple[DeclaredDivergence, ...] = (
    DeclaredDivergence(
        id="seed-stale-grouped-transpose-check",
        item="probe:RewriteConvPass.grouped_transposed_fp",
        b_error_type="RuntimeError",
        b_error_contains="Grouped transpose convolutions are not supported",
        reason=(
            "the seed monkey-patch replaces RewriteConvPass.call with a copy that still raises"
            " 'Grouped transpose convolutions are not supported', a check upstream dropped in"
            " 5123efe184 (before 1.2.0); the diffs do not carry it. In a full lowering"
            " DecomposeGroupedConvPass splits grouped transposed convs first, so it is"
            " reachable only when RewriteConvPass runs with the seed on such a conv directly"
        ),
    ),
)


@dataclass
class Options:
    """What to run and where."""

    stock_python: str
    patched_python: str
    runtime_patch: str = DEFAULT_RUNTIME_PATCH
    models: str | None = None
    fast: bool = False
    only: Sequence[str] = ()
    probes: bool = True
    parallel: bool = True
    attribute: bool = True
    keep_bytes: bool = False
    log_dir: Path | None = None
    pythonpath: dict[str, str] = field(default_factory=dict)  # path letter -> extra entries


@dataclass
class ItemVerdict:
    """Everything decided about one case or probe."""

    item: str  # "case:NAME" / "probe:NAME"
    info: dict[str, Any]
    results: dict[str, dict[str, Any]]
    bc_diffs: list[str] = field(default_factory=list)
    bc: str = "agree"  # agree | declared | UNDECLARED
    declared: str | None = None
    ab_diffs: list[str] = field(default_factory=list)
    ab: str = "same"  # same | fixed | regression | changed
    fix: int | None = None
    claim_problem: str | None = None

    @property
    def name(self) -> str:
        """Return the bare case or probe name."""
        return self.item.split(":", 1)[1]


@dataclass
class Report:
    """The outcome of one equivalence run."""

    options: dict[str, Any]
    workers: dict[str, dict[str, Any]]
    verdicts: list[ItemVerdict]
    declared: tuple[DeclaredDivergence, ...]
    wall_seconds: float
    phase_seconds: dict[str, float]

    @property
    def failures(self) -> list[str]:
        """Return one line per problem that makes the run fail."""
        problems = []
        for verdict in self.verdicts:
            if verdict.bc == "UNDECLARED":
                problems.append(
                    f"{verdict.item}: undeclared divergence between (b) and (c):"
                    f" {'; '.join(verdict.bc_diffs)}"
                )
            if verdict.claim_problem:
                problems.append(f"{verdict.item}: {verdict.claim_problem}")
        return problems


# --- comparison and verdicts (pure) ---------------------------------------------------------


def _error_key(result: Mapping[str, Any]) -> tuple[str, str] | None:
    error = result.get("error")
    return (str(error.get("type")), str(error.get("message"))) if error else None


def _numerics_key(result: Mapping[str, Any]) -> Any:
    numerics = result.get("numerics") or {}
    if "error" in numerics:
        return ("error", numerics["error"].get("type"), numerics["error"].get("message"))
    return [o.get("sha256") for o in numerics.get("outputs", [])]


def _payload_key(payloads: Any) -> Any:
    return [(p.get("backend"), p.get("size"), p.get("sha256")) for p in payloads or []]


def _vgf_key(result: Mapping[str, Any]) -> Any:
    vgf = result.get("vgf") or {}
    if "payloads" in vgf:
        return _payload_key(vgf["payloads"])
    if "error" in vgf:
        return ("error", vgf["error"].get("type"), vgf["error"].get("message"))
    return None  # skipped: nothing to compare


def compare(x: Mapping[str, Any], y: Mapping[str, Any]) -> list[str]:
    """Return the names of the observations in which two results of one item differ."""
    diffs = []
    if x.get("status") != y.get("status"):
        diffs.append("status")
    elif _error_key(x) != _error_key(y):
        diffs.append("error")
    if "value" in x or "value" in y:
        if x.get("value") != y.get("value"):
            diffs.append("value")
        return diffs
    if x.get("graph") != y.get("graph"):
        diffs.append("graph")
    if _payload_key(x.get("payloads")) != _payload_key(y.get("payloads")):
        diffs.append("tosa payload")
    if _numerics_key(x) != _numerics_key(y):
        diffs.append("numerics")
    if _vgf_key(x) != _vgf_key(y):
        diffs.append("vgf payload")
    return diffs


def numerically_wrong(result: Mapping[str, Any]) -> bool:
    """Return True when a delegate output is far from the (fake-quantised) reference."""
    numerics = result.get("numerics") or {}
    errors = numerics.get("max_abs_err_vs_fake_quant") or []
    ranges = numerics.get("reference_max_abs") or []
    for error, scale in zip(errors, ranges, strict=False):
        if error is None:
            return True
        if error > WRONG_RELATIVE * float(scale) + WRONG_ABSOLUTE:
            return True
    return False


def classify(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """Classify a stock (a) vs runtime-patched (b) difference: fixed, regression or changed."""
    a_ok, b_ok = a.get("status") == "ok", b.get("status") == "ok"
    if not a_ok and b_ok:
        return "fixed"
    if a_ok and not b_ok:
        return "regression"
    if not a_ok and not b_ok:
        return "changed"
    a_wrong, b_wrong = numerically_wrong(a), numerically_wrong(b)
    if b_wrong and not a_wrong:
        return "regression"
    # Stock wrong and patched right, or an intended change of the lowering.
    return "fixed"


def judge(
    item: str,
    info: Mapping[str, Any],
    results: Mapping[str, Mapping[str, Any]],
    declared: Iterable[DeclaredDivergence] = DECLARED_DIVERGENCES,
) -> ItemVerdict:
    """Decide (b) vs (c) and (a) vs (b) for one item (attribution comes later)."""
    verdict = ItemVerdict(
        item=item, info=dict(info), results={k: dict(v) for k, v in results.items()}
    )
    a, b, c = results["a"], results["b"], results["c"]
    verdict.bc_diffs = compare(b, c)
    if verdict.bc_diffs:
        match = next((d for d in declared if d.matches(item, b, c)), None)
        if match is not None:
            verdict.bc, verdict.declared = "declared", match.id
        else:
            verdict.bc = "UNDECLARED"
    verdict.ab_diffs = compare(a, b)
    if verdict.ab_diffs:
        verdict.ab = classify(a, b)
    return verdict


def check_claim(verdict: ItemVerdict) -> None:
    """Record a problem when a case's claimed stock/patched difference did not happen."""
    claim = (verdict.info.get("claim") or None) if verdict.item.startswith("case:") else None
    if not claim:
        return
    wanted = f"{claim['effect']} by patch {claim['fix']}"
    found = "no difference" if verdict.ab == "same" else f"{verdict.ab} by patch {verdict.fix}"
    if verdict.ab != claim["effect"] or verdict.fix != claim["fix"]:
        verdict.claim_problem = (
            f"the corpus claims '{wanted}' ({claim['trigger']}), the run found '{found}'"
        )


# --- workers ----------------------------------------------------------------------------


class Worker:
    """One ``python -m overlay.worker`` process, spoken to in JSON lines."""

    def __init__(self, path: str, python: str, log: IO[str], pythonpath: str = "") -> None:
        self.path = path
        self.python = python
        self.log = log
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), pythonpath, env.get("PYTHONPATH", "")) if p
        )
        env.setdefault("PYTHONHASHSEED", "0")
        try:
            self.process = subprocess.Popen(
                [python, "-m", "overlay.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                cwd=str(REPO_ROOT),
            )
        except OSError as exc:
            raise EquivalenceError(
                f"cannot start the worker for path ({path}) {PATH_TITLES[path]}",
                expected="a Python with torch and executorch",
                found=f"{python}: {exc}",
                hint="pass --stock-python / --patched-python, or run `nox -s equivalence`",
            ) from exc

    def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and return the reply."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise EquivalenceError(
                f"the worker of path ({self.path}) {PATH_TITLES[self.path]} died",
                expected="one JSON reply per request",
                found=f"end of output after {message.get('cmd')} {message.get('name', '')}",
                hint=f"read its log: {getattr(self.log, 'name', 'stderr')}",
            )
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        """Ask the worker to quit and wait for it."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.process.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _check_reply(path: str, reply: Mapping[str, Any], what: str) -> None:
    error = reply.get("error")
    if error and "status" not in reply:
        raise EquivalenceError(
            f"path ({path}) {PATH_TITLES[path]} could not {what}",
            expected="a working environment and valid inputs",
            found=f"{error.get('type')}: {error.get('message')}",
            hint="fix the environment, the --runtime-patch or the --models file",
            details=str(error.get("traceback", "")),
        )


def _select(cases: list[CaseInfo], options: Options) -> list[CaseInfo]:
    if options.only:
        known = {c.name for c in cases}
        unknown = [n for n in options.only if n not in known]
        if unknown:
            raise EquivalenceError(
                f"unknown case(s): {', '.join(unknown)}",
                expected=", ".join(sorted(known)),
                found=", ".join(unknown),
                hint="list them with `python -m overlay equivalence --list`",
            )
        return [c for c in cases if c.name in options.only]
    if options.fast:
        return [c for c in cases if c.fast]
    return cases


def list_items(options: Options) -> tuple[list[CaseInfo], dict[str, str]]:
    """Ask a stock worker for the corpus (plus user models) and the probes."""
    log = _log(options, "list")
    worker = Worker("a", options.stock_python, log)
    try:
        _check_reply("a", worker.request({"cmd": "init", "models": options.models}), "start")
        listing = worker.request({"cmd": "list"})
    finally:
        worker.close()
        log.close()
    return [CaseInfo.from_json(c) for c in listing["cases"]], dict(listing["probes"])


def _log(options: Options, name: str) -> IO[str]:
    folder = options.log_dir or (REPO_ROOT / "reports" / "equivalence-logs")
    folder.mkdir(parents=True, exist_ok=True)
    return (folder / f"worker-{name}.log").open("w", encoding="utf-8")


def run(options: Options, progress: Callable[[str], None] = lambda _: None) -> Report:
    """Run every selected case and probe on the three paths and judge them."""
    started = time.perf_counter()
    plans = {
        "a": (options.stock_python, None),
        "b": (options.stock_python, options.runtime_patch),
        "c": (options.patched_python, None),
    }
    logs = {path: _log(options, path) for path in PATHS}
    workers = {
        path: Worker(path, plans[path][0], logs[path], options.pythonpath.get(path, ""))
        for path in PATHS
    }
    infos: dict[str, dict[str, Any]] = {}
    replies: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in PATHS}
    errors: list[BaseException] = []
    phases: dict[str, float] = {}
    try:

        def init(path: str) -> None:
            reply = workers[path].request(
                {"cmd": "init", "runtime_patch": plans[path][1], "models": options.models}
            )
            _check_reply(path, reply, "start")
            replies[path] = reply

        _in_parallel(PATHS, init, errors, options.parallel)
        if errors:
            raise errors[0]
        phases["start (import torch/executorch)"] = time.perf_counter() - started
        listing = workers["a"].request({"cmd": "list"})
        cases = _select([CaseInfo.from_json(c) for c in listing["cases"]], options)
        items: list[tuple[str, str]] = [("case", c.name) for c in cases]
        for case in cases:
            infos[f"case:{case.name}"] = case.to_json()
        if options.probes and not options.only:
            for name, description in listing["probes"].items():
                items.append(("probe", name))
                infos[f"probe:{name}"] = {"name": name, "description": description}
        progress(f"{len(items)} items on 3 paths ({'parallel' if options.parallel else 'serial'})")

        def drive(path: str) -> None:
            for kind, name in items:
                message = {"cmd": kind, "name": name, "keep_bytes": options.keep_bytes}
                reply = workers[path].request(message)
                _check_reply(path, reply, f"run {kind} {name}")
                results[path][f"{kind}:{name}"] = reply
                progress(f"({path}) {kind} {name}: {reply.get('status')}")

        mark = time.perf_counter()
        _in_parallel(PATHS, drive, errors, options.parallel)
        if errors:
            raise errors[0]
        phases["cases and probes"] = time.perf_counter() - mark
        verdicts = [
            judge(item, infos[item], {p: results[p][item] for p in PATHS}) for item in infos
        ]
        mark = time.perf_counter()
        if options.attribute:
            _attribute(workers["a"], verdicts, progress)
        phases["attribution"] = time.perf_counter() - mark
        for verdict in verdicts:
            check_claim(verdict)
    finally:
        for worker in workers.values():
            worker.close()
        for log in logs.values():
            log.close()
    worker_info = {
        path: {**replies.get(path, {}), "title": PATH_TITLES[path], "runtime_patch": plans[path][1]}
        for path in PATHS
    }
    return Report(
        options={
            "stock_python": options.stock_python,
            "patched_python": options.patched_python,
            "runtime_patch": options.runtime_patch,
            "models": options.models,
            "fast": options.fast,
            "only": list(options.only),
            "parallel": options.parallel,
        },
        workers=worker_info,
        verdicts=verdicts,
        declared=DECLARED_DIVERGENCES,
        wall_seconds=time.perf_counter() - started,
        phase_seconds=phases,
    )


def _in_parallel(
    paths: Sequence[str], job: Callable[[str], None], errors: list[BaseException], parallel: bool
) -> None:
    def guarded(path: str) -> None:
        try:
            job(path)
        except BaseException as exc:
            errors.append(exc)

    if not parallel:
        for path in paths:
            guarded(path)
        return
    threads = [threading.Thread(target=guarded, args=(p,)) for p in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _attribute(stock: Worker, verdicts: list[ItemVerdict], progress: Callable[[str], None]) -> None:
    """Find the one runtime fix that turns (a)'s result into (b)'s, per differing item."""
    for verdict in verdicts:
        if verdict.ab == "same":
            continue
        kind, name = verdict.item.split(":", 1)
        for candidate in runtime.FIXES:
            reply = stock.request({"cmd": kind, "name": name, "fixes": [candidate.number]})
            if not compare(reply, verdict.results["b"]):
                verdict.fix = candidate.number
                progress(f"{verdict.item}: {verdict.ab} by patch {candidate.number}")
                break


def options_from_env(**overrides: Any) -> Options:
    """Build Options from $OVERLAY_STOCK_PYTHON / $OVERLAY_PATCHED_PYTHON plus overrides."""
    stock = overrides.pop("stock_python", None) or os.environ.get("OVERLAY_STOCK_PYTHON")
    patched = overrides.pop("patched_python", None) or os.environ.get("OVERLAY_PATCHED_PYTHON")
    if not stock or not patched:
        raise EquivalenceError(
            "no stock or patched Python to run the paths in",
            expected="--stock-python and --patched-python (or $OVERLAY_STOCK_PYTHON and"
            " $OVERLAY_PATCHED_PYTHON)",
            found=f"stock={stock!r}, patched={patched!r}",
            hint="run `nox -s equivalence`, which builds both venvs with uv",
        )
    return Options(stock_python=stock, patched_python=patched, **overrides)


def patch_name(number: int | None) -> str:
    """Return the patch file name for a fix number."""
    return runtime.fix(number).patch if number is not None else "unattributed"
