"""Move the series to a new executorch release: a checked candidate, promoted only on request.

``retarget`` never touches the current series. It writes a candidate series folder
(``<out>/patches``: series, patches, SHA256SUMS, pins.toml) and a report:

1. the release's wheels (downloaded with pip, which checks each file against the sha256
   the index publishes; the sha256 of the file is recorded), the pristine sha256 of every
   file the kept patches touch, and runtime pins confirmed by a lowering (every attempt
   recorded);
2. per patch, from its text: *carried* (applies, maybe at an offset; regenerated at the
   new line numbers), *ported* (a maintained port under ``patches/<line>/ports/``, or a git
   3-way merge from the pinned base to the new release), *conflict* (a git work tree with
   the merge markers, the hunks named and the command to resume), or *drop*;
3. per patch, from behaviour: its trigger cases on stock of the new release in its own
   env (:mod:`overlay.upstream.behaviour`): if stock now gets them right the patch is
   dropped whatever its text says; every disagreement with the text is reported;
4. equivalence across releases: stock and patched of the pinned and of the new release
   on the corpus, each change attributed to "upstream change" or "patch".

``promote`` moves the candidate into ``patches/`` after its checks passed and keeps the
old series under ``patches/archive/<old version>/`` (usable with ``--patches``).
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from overlay import fixes, worktree
from overlay._git import git, git_bytes, merge_file
from overlay._hashing import sha256_bytes, sha256_file
from overlay.dist.wheels import build_patched_wheel, fetch_wheel, read_members
from overlay.envs import lockfiles, release_venvs
from overlay.equivalence.protocol import InitReply, ItemResult
from overlay.equivalence.verdict import compare
from overlay.errors import OverlayError, UpstreamError
from overlay.fixes import DiffOnly
from overlay.lines.pins import PINS_FILE, SERIES_FILE, Pins, WheelPin
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import CHECKSUMS_FILE, Patch, Series, format_checksums, load_series
from overlay.upstream import behaviour
from overlay.upstream.matrix import APPLYING, Status, check_patch, parse_applied_upstream, port_for
from overlay.upstream.releases import load_ports, read_release

Progress = Callable[[str], None]
ARCHIVE_DIR = "archive"
REPORT_STEM = "retarget"
RESUME_STATE = "overlay-retarget.json"
MERGE_MESSAGE = "OVERLAY_MERGE_MSG"
LOWERING_CHECK_CASE = "conv_relu_int8"  # a lowering every supported release must do (VGF too)


class Action(enum.StrEnum):
    """What happens to a patch on the new release."""

    DROP = "drop"
    CARRIED = "carried"
    PORTED = "ported"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class WheelRecord:
    """One wheel of the new release for a pinned interpreter/platform."""

    file: str
    sha256: str  # "" when the release publishes no such wheel
    python: str
    platform: str
    note: str = ""


@dataclass(frozen=True)
class PinAttempt:
    """One set of runtime pins tried with a lowering."""

    runtime: dict[str, str]
    ok: bool
    detail: str
    seconds: float


@dataclass(frozen=True)
class TextPlan:
    """A patch's text on the new release, before behaviour is known."""

    name: str
    status: Status  # the matrix status of the pinned patch on the new release
    detail: str
    action: Action
    source: str  # "pinned", "port 1.5.1", "3-way merge", "Applied-Upstream", ...
    after: dict[str, str] = field(default_factory=dict)  # new release texts after it
    conflicts: tuple[str, ...] = ()  # "path: hunk N" of the 3-way merge
    merge_note: str = ""  # what a 3-way merge of the pinned patch gave (also when a port won)
    message: str = ""  # the work tree commit message (the port's header for a port)


@dataclass(frozen=True)
class PatchVerdict:
    """The final word on one patch: action, evidence and disagreements."""

    name: str
    action: Action
    text: str
    plan: TextPlan
    behaviour: behaviour.PatchBehaviour | None
    flags: tuple[str, ...] = ()  # disagreements and redundancies

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "name": self.name,
            "action": self.action.value,
            "text": self.text,
            "text_status": self.plan.status.value,
            "text_detail": self.plan.detail,
            "source": self.plan.source,
            "conflicts": list(self.plan.conflicts),
            "merge_note": self.plan.merge_note,
            "behaviour": self.behaviour.as_dict() if self.behaviour else None,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class CaseMove:
    """One corpus case across the move: pinned patched build vs new patched build."""

    case: str
    old_patched: str  # quality
    new_patched: str
    changes: tuple[str, ...]  # observations that differ
    attribution: str  # "no change", "upstream change", "patch", "upstream change and patch"
    note: str

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "case": self.case,
            "old_patched": self.old_patched,
            "new_patched": self.new_patched,
            "changes": list(self.changes),
            "attribution": self.attribution,
            "note": self.note,
        }


@dataclass(frozen=True)
class Retarget:
    """Everything one retarget found and wrote."""

    old_version: str
    version: str
    candidate: Path  # the candidate series folder
    wheels: tuple[WheelRecord, ...]
    runtime: dict[str, str]
    attempts: tuple[PinAttempt, ...]
    verdicts: tuple[PatchVerdict, ...]
    runtime_form: str
    moves: tuple[CaseMove, ...]
    runs: dict[str, behaviour.ReleaseRun]  # "old" / "new"
    timings: dict[str, float]
    worktree: Path | None
    resume: str
    fast: bool
    problems: tuple[str, ...]
    wheel: Path = Path()  # the release's wheel the sources were read from
    release_tests: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    locks: tuple[Path, ...] = ()  # the candidate's locks (patches/locks/<tag>.txt)

    @property
    def ready(self) -> bool:
        """Return True when the candidate can be promoted."""
        return not self.problems

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "schema": 1,
            "old_version": self.old_version,
            "version": self.version,
            "candidate": str(self.candidate),
            "ready": self.ready,
            "problems": list(self.problems),
            "fast": self.fast,
            "wheels": [w.__dict__ for w in self.wheels],
            "runtime": self.runtime,
            "attempts": [a.__dict__ for a in self.attempts],
            "patches": [v.as_dict() for v in self.verdicts],
            "runtime_form": self.runtime_form,
            "moves": [m.as_dict() for m in self.moves],
            "runs": {k: r.as_dict() for k, r in self.runs.items()},
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
            "worktree": str(self.worktree) if self.worktree else None,
            "resume": self.resume,
            "locks": [str(path) for path in self.locks],
        }


# --- the text layer ------------------------------------------------------------------------


def _merge_file(current: str, base: str, other: str) -> tuple[str, int]:
    """3-way merge one file; return (text, number of conflicts)."""
    labels = ("new release", "pinned base", "pinned patch")
    merged, count = merge_file(encode(current), encode(base), encode(other), labels)
    return decode(merged), count


def _conflict_hunks(merged: str, path: str) -> list[str]:
    """Name each conflict block of a merged file by its line number."""
    found: list[str] = []
    for number, line in enumerate(merged.split("\n"), start=1):
        if line.startswith("<<<<<<< "):
            found.append(f"{path}: conflict {len(found) + 1} at line {number}")
    return found


def plan_patch(
    patch: Patch,
    port: tuple[str, Patch] | None,
    old_before: Mapping[str, str],
    new_before: Mapping[str, str],
    names: frozenset[str],
) -> TextPlan:
    """Decide a patch's text on the new release (pure but for ``git merge-file``).

    ``old_before``/``new_before`` are the texts before this patch (earlier kept patches
    applied) on the pinned and on the new release.
    """
    check, after = check_patch(patch, new_before, names)
    info = parse_applied_upstream(patch.header.get("Applied-Upstream", ""))
    merge_note, merged, conflicts = _three_way(patch, old_before, new_before)
    if port is not None:
        port_version, port_patch = port
        port_check, port_after = check_patch(port_patch, new_before, names)
        if port_check.status in APPLYING:
            note = merge_note or f"the pinned patch {check.short} on the new release"
            return TextPlan(
                patch.name,
                check.status,
                check.detail,
                Action.PORTED,
                f"port {port_version}",
                {p: port_after[p] for p in port_patch.targets},
                (),
                note,
                worktree.commit_message(patch.name, port_patch.subject, port_patch.header_text),
            )
    if check.status in APPLYING:
        return TextPlan(
            patch.name,
            check.status,
            check.detail,
            Action.CARRIED,
            "pinned",
            {p: after[p] for p in patch.targets},
        )
    if check.status is Status.CONTAINED:
        return TextPlan(patch.name, check.status, check.detail, Action.DROP, "contained upstream")
    if info.version is not None or info.text:
        return TextPlan(
            patch.name,
            check.status,
            check.detail,
            Action.DROP,
            f"Applied-Upstream: {info.text}",
            merged or {},
            tuple(conflicts),
            merge_note,
        )
    if merged is not None and not conflicts:
        return TextPlan(
            patch.name, check.status, check.detail, Action.PORTED, "3-way merge", merged
        )
    return TextPlan(
        patch.name,
        check.status,
        check.detail,
        Action.CONFLICT,
        "3-way merge",
        merged or {},
        tuple(conflicts),
        merge_note,
    )


def _three_way(
    patch: Patch, old_before: Mapping[str, str], new_before: Mapping[str, str]
) -> tuple[str, dict[str, str] | None, list[str]]:
    """Merge the pinned patch onto the new release, file by file."""
    try:
        old_after = apply_patch(patch, old_before)
    except HunkMismatchError:
        return "the pinned patch does not apply to the pinned base", None, []
    merged: dict[str, str] = {}
    conflicts: list[str] = []
    for path in patch.targets:
        if path not in new_before:
            return f"{path} is not in the new release (moved or removed)", None, [path]
        text, count = _merge_file(new_before[path], old_before[path], old_after[path])
        merged[path] = text
        if count:
            conflicts += _conflict_hunks(text, path)
    if conflicts:
        return f"3-way merge conflicts: {'; '.join(conflicts)}", merged, conflicts
    if all(merged[p] == new_before[p] for p in merged):
        return "3-way merge gives the new release unchanged (already there)", merged, []
    return "3-way merge applies cleanly", merged, []


def plan_series(
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    old_files: Mapping[str, bytes],
    new_files: Mapping[str, bytes],
    version: str,
) -> list[TextPlan]:
    """Plan every patch in order; a kept patch's result is the base of the next one."""
    old_texts = {p: decode(d) for p, d in old_files.items()}
    new_texts = {p: decode(d) for p, d in new_files.items()}
    names = frozenset(new_files)
    plans = []
    for patch in series.patches:
        plan = plan_patch(patch, port_for(ports, patch.name, version), old_texts, new_texts, names)
        plans.append(plan)
        with contextlib.suppress(HunkMismatchError):
            old_texts = apply_patch(patch, old_texts)
        if plan.action in (Action.CARRIED, Action.PORTED):
            new_texts = {**new_texts, **plan.after}
    return plans


# --- the candidate folder ------------------------------------------------------------------


def toml_string(value: str) -> str:
    """Return a TOML basic string."""
    return json.dumps(value)


def render_pins(
    old: Pins,
    *,
    version: str,
    runtime: Mapping[str, str],
    wheels: Sequence[WheelRecord],
    pristine: Mapping[str, str],
    attempts: Sequence[PinAttempt],
    matrix_sha256: Mapping[str, str],
) -> str:
    """Return the candidate's pins.toml text."""
    lines = [
        f"# Pins of the executorch {version} candidate, written by `python -m overlay retarget`.",
        "",
        "[executorch]",
        f"version = {toml_string(version)}",
        f"git_tag = {toml_string('v' + version)}",
        f"upstream_repo = {toml_string(old.upstream_repo)}",
        f"package_dir = {toml_string(old.package_dir)}",
        "",
        "# Confirmed by a lowering (TOSA and VGF) in a fresh env. Tried, in order:",
    ]
    for attempt in attempts:
        pins = ", ".join(f"{k} {v}" for k, v in attempt.runtime.items())
        state = "ok" if attempt.ok else "failed: " + attempt.detail.replace("\n", " ")[:150]
        lines.append(f"#   {pins}: {state}")
    lines += ["[runtime]", *(f"{k} = {toml_string(v)}" for k, v in runtime.items()), ""]
    extras = {k: [n for n in v if n in runtime] for k, v in old.extras.items()}
    if any(extras.values()):
        lines.append("# The patched wheel's extras (as pinned), e.g. `executorch[arm]`.")
        lines.append("[extras]")
        for extra, names in extras.items():
            if names:
                lines.append(f"{extra} = [" + ", ".join(toml_string(n) for n in names) + "]")
        lines.append("")
    if old.macos_deployment_target:
        lines += ["[lock]", f"macos_deployment_target = {toml_string(old.macos_deployment_target)}"]
        lines.append("")
    lines.append("# sha256 of the wheel files (pip checked each against the index's sha256).")
    for wheel in wheels:
        if not wheel.sha256:
            lines.append(f"# not published: {wheel.file}")
            continue
        lines += [
            "[[wheels]]",
            f"file = {toml_string(wheel.file)}",
            f"sha256 = {toml_string(wheel.sha256)}",
            f"python = {toml_string(wheel.python)}",
            f"platform = {toml_string(wheel.platform)}",
            "",
        ]
    lines.append("# sha256 of every pristine file the series touches, at its repository path.")
    lines.append("[pristine]")
    lines += [f"{toml_string(p)} = {toml_string(d)}" for p, d in pristine.items()]
    versions = list(dict.fromkeys([*old.matrix_versions, version]))
    lines += [
        "",
        "[matrix]",
        "versions = [" + ", ".join(toml_string(v) for v in versions) + "]",
        f"python = {toml_string(old.matrix_python)}",
        f"platform = {toml_string(old.matrix_platform)}",
        "",
        "[matrix.sha256]",
        *(f"{toml_string(v)} = {toml_string(d)}" for v, d in matrix_sha256.items()),
    ]
    if old.upstream:
        lines += ["", "[upstream]"]
        for key, values in old.upstream.items():
            lines.append(f"{key} = [" + ", ".join(toml_string(v) for v in values) + "]")
    return "\n".join(lines) + "\n"


def fetch_release_wheels(pins: Pins, version: str, progress: Progress) -> list[WheelRecord]:
    """Download the release's wheel for every interpreter/platform the pinned series has."""
    records = []
    for pin in pins.wheels:
        name = pin.filename.replace(f"-{pins.executorch}-", f"-{version}-", 1)
        known = pins.matrix_sha256.get(version, "") if _is_matrix(pins, pin) else ""
        wanted = WheelPin(name, known, pin.python, pin.platform)
        try:
            path = fetch_wheel(wanted)
        except OverlayError as exc:
            records.append(WheelRecord(name, "", pin.python, pin.platform, exc.message))
            progress(f"{name}: not published ({exc.message})")
            continue
        digest = sha256_file(path)
        records.append(WheelRecord(name, digest, pin.python, pin.platform))
        progress(f"{name}: sha256 {digest[:12]}")
    return records


def _is_matrix(pins: Pins, pin: WheelPin) -> bool:
    return pin.python == pins.matrix_python and pin.platform == pins.matrix_platform


def release_metadata(wheel: Path) -> tuple[list[Requirement], str | None]:
    """Return the wheel's Requires-Dist and the upstream commit it was built from."""
    members = read_members(
        wheel,
        lambda n: n.endswith(".dist-info/METADATA") or n == "executorch/version.py",
    )
    requirements: list[Requirement] = []
    commit = None
    for name, data in members.items():
        text = data.decode("utf-8", "replace")
        if name.endswith("METADATA"):
            for raw in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
                try:
                    requirements.append(Requirement(raw))
                except InvalidRequirement:
                    continue
        else:
            for line in text.splitlines():
                if line.startswith("git_version"):
                    commit = line.split("=", 1)[1].strip().strip("'\"") or None
    return requirements, commit


@dataclass(frozen=True)
class PinCandidate:
    """A runtime pin set to try, and where each value came from."""

    runtime: dict[str, str]
    origin: str


def runtime_candidates(
    old: Pins,
    requirements: Sequence[Requirement],
    torch_versions: Sequence[str],
) -> list[PinCandidate]:
    """Return runtime pin sets to try, best first (pure).

    torch: the given versions (upstream's torch pin first), then the pinned one. torchao:
    the pinned one if the release's Requires-Dist allows it, else its lower bound.
    tosa-tools and the model converter: the ``vgf`` extra's pins, then the pinned ones. The
    tools that run VGF files (the pins' own ``vgf`` extra: scenario runner, VGF library,
    emulation layer) are one ML SDK release and stay as pinned: the release's extra names
    only the emulation layer of them.
    """
    runs_vgf = set(old.extras.get("vgf", ()))
    extra = {
        r.name.lower().replace("_", "-"): _exact(r)
        for r in requirements
        if r.marker is not None and 'extra == "vgf"' in str(r.marker)
    }
    extra = {k: v for k, v in extra.items() if k not in runs_vgf}
    base: dict[str, str] = dict(old.runtime)
    for requirement in requirements:
        name = requirement.name.lower().replace("_", "-")
        if (
            name in base
            and requirement.marker is None
            and not requirement.specifier.contains(base[name], prereleases=True)
        ):
            base[name] = _lower_bound(requirement) or base[name]
    torches = list(dict.fromkeys([*torch_versions, old.runtime.get("torch", "")]))
    wanted = {k: v for k, v in extra.items() if k in base and v}
    # The extra's tools first, then each one back at its pinned version, then all pinned.
    tools = [wanted, *({k: v for k, v in wanted.items() if k != key} for key in wanted), {}]
    out: list[PinCandidate] = []
    for torch in [t for t in torches if t]:
        for number, tool in enumerate(tools):
            runtime = {**base, "torch": torch, **tool}
            if any(c.runtime == runtime for c in out):
                continue
            origin = "torch " + ("upstream pin" if torch in torch_versions else "as pinned")
            kept = [k for k in wanted if k not in tool]
            origin += f", vgf extra's tools but pinned {', '.join(kept)}" if kept and tool else ""
            origin += ", vgf extra's tools" if number == 0 and tool else ""
            origin += ", pinned tools" if not tool else ""
            out.append(PinCandidate(runtime, origin))
    return out


def _exact(requirement: Requirement) -> str:
    specs = list(requirement.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else ""


def _lower_bound(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        if spec.operator in (">=", "=="):
            return spec.version
    return None


def upstream_torch_pin(clone: Path | None, commit: str | None, version: str) -> tuple[str, str]:
    """Return (torch version, where it was read) from upstream's ``torch_pin.py``."""
    if clone is None:
        return "", ""
    for ref, label in ((commit, "the release commit"), (f"v{version}", f"tag v{version}"),
                       ("main", "main (the release commit is not in the clone)")):  # fmt: skip
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


# --- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What to retarget and how."""

    version: str
    patches_dir: Path
    out_dir: Path
    fast: bool = True
    behaviour: bool = True
    equivalence: bool = True
    torch: tuple[str, ...] = ()
    upstream_clone: Path | None = None
    envs_root: Path | None = None
    resume: bool = False  # continue after a conflict was resolved in <out>/worktree
    locks: bool = True  # resolve the candidate's locks (uv, the index) when it is complete
    today: str = field(default_factory=lambda: datetime.date.today().isoformat())


def retarget(request: Request, progress: Progress = lambda _: None) -> Retarget:
    """Build and check the candidate series for ``request.version`` (the current one stays)."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    series = load_series(request.patches_dir)
    old = series.pins
    version = request.version
    if Version(version) <= old.executorch:
        raise UpstreamError(
            f"executorch {version} is not newer than the pinned {old.executorch}",
            expected=f"a release after {old.executorch}",
            found=version,
            hint="list releases with `pip index versions executorch`",
        )
    mark = time.perf_counter()
    progress(f"fetching executorch {version} wheels")
    wheels = fetch_release_wheels(old, version, progress)
    matrix_wheel = fetch_wheel(old.matrix_pin(version))
    new_files = read_release(old, matrix_wheel, version)
    old_files = read_release(old, fetch_wheel(old.matrix_pin(str(old.executorch))), "pinned")
    release_tests = read_release(old, matrix_wheel, version, prefix="backends/arm/test/")
    requirements, commit = release_metadata(matrix_wheel)
    timings["wheels"] = time.perf_counter() - mark

    out = request.out_dir
    candidate, work = out / "patches", out / "worktree"
    ports = load_ports(request.patches_dir, series)
    left = resume_worktree(series, work, new_files) if request.resume else []
    plans = plan_series(series, ports, old_files, new_files, version)
    if request.resume:
        plans = [resolved(p, work, left) for p in plans]
    matrix_sha = dict(old.matrix_sha256)
    matrix_sha.setdefault(version, sha256_file(matrix_wheel))
    torch_pin, torch_origin = upstream_torch_pin(request.upstream_clone, commit, version)
    if torch_origin:
        progress(f"upstream's torch pin for {version}: {torch_pin} ({torch_origin})")
    candidates = runtime_candidates(
        old, requirements, [*request.torch, *([torch_pin] if torch_pin else [])]
    )
    runtime, attempts = candidates[0].runtime, list[PinAttempt]()
    versions = [str(old.executorch), version]
    cases = _cases(request.fast, versions)
    runs: dict[str, behaviour.ReleaseRun] = {}
    found: dict[str, behaviour.PatchBehaviour] = {}
    stock: dict[str, tuple[InitReply, dict[str, ItemResult]]] = {}
    old_envs: tuple[Path, Path] | None = None
    if request.behaviour:
        mark = time.perf_counter()
        runtime, attempts, stock_new = confirm_runtime(old, version, candidates, request, progress)
        jobs = {"new stock": str(stock_new.python)}
        if request.equivalence:
            old_envs = _pinned_envs(series, request, progress)
            jobs["old stock"] = str(old_envs[0])
        timings["envs and pin checks"] = time.perf_counter() - mark
        mark = time.perf_counter()
        stock = behaviour.run_envs(jobs, cases, out_dir=out / "logs", progress=progress)
        timings["trigger cases on stock"] = time.perf_counter() - mark
        stock_run = behaviour.assemble(version, stock["new stock"], None)
        for plan in plans:
            fix = fixes.by_patch(plan.name)
            if fix is None:
                continue
            bug, other = behaviour.triggers(fix, versions)
            decided = behaviour.decide_patch(
                plan.name, version, _judged(stock_run, bug), _judged(stock_run, other), kept=False
            )
            found[plan.name] = decided
    final_plans = [_with_behaviour(p, found.get(p.name)) for p in plans]
    pristine = candidate_pristine(final_plans, new_files)
    mark = time.perf_counter()
    resume = write_candidate(
        series,
        final_plans,
        new_files,
        version=version,
        out=out,
        request=request,
        pins_text=render_pins(
            old,
            version=version,
            runtime=runtime,
            wheels=wheels,
            pristine=pristine,
            attempts=attempts,
            matrix_sha256=matrix_sha,
        ),
    )
    timings["series"] = time.perf_counter() - mark
    problems: list[str] = []
    moves: list[CaseMove] = []
    new_series = load_series(candidate)  # with a conflict: the patches before it (partial)
    if request.behaviour:
        mark = time.perf_counter()
        jobs = {}
        patched_new = None
        if new_series.patches:
            wheel = build_patched_wheel(
                new_series, matrix_wheel, new_series.pins.matrix_pin(version), out / "dist"
            ).path
            spec = release_venvs.release_spec(new_series.pins, "patched", executorch=wheel)
            spec = replace(spec, requirements=(*spec.requirements, *_test_requirements(old)))
            patched_new = release_venvs.ensure(spec, request.envs_root, progress=progress)
            jobs["new patched"] = str(patched_new.python)
        if old_envs is not None:
            jobs["old patched"] = str(old_envs[1])
        timings["patched envs"] = time.perf_counter() - mark
        mark = time.perf_counter()
        patched = behaviour.run_envs(jobs, cases, out_dir=out / "logs", progress=progress)
        timings["corpus on patched"] = time.perf_counter() - mark
        runs["new"] = behaviour.assemble(version, stock["new stock"], patched.get("new patched"))
        if old_envs is not None:
            runs["old"] = behaviour.assemble(
                str(old.executorch), stock["old stock"], patched["old patched"]
            )
            moves = case_moves(runs["old"], runs["new"])
        regressions = behaviour.regressions_of(runs["new"])
        mark = time.perf_counter()
        for patch in new_series.patches:
            fix = fixes.by_patch(patch.name)
            if fix is None:
                continue
            test = None
            added = behaviour.new_tests(patch.diff)
            if added and patched_new is not None:
                patched_files = {
                    p: encode(t) for p, t in _plan_of(final_plans, patch.name).after.items()
                }
                test = behaviour.run_tests_both_ways(
                    str(stock_new.python),
                    str(patched_new.python),
                    release_tests=release_tests,
                    patched_files=patched_files,
                    pytest_ini=behaviour.pytest_ini(request.upstream_clone),
                    selection=added,
                    log_dir=out / "logs" / "pytest",
                )
            bug, other = behaviour.triggers(fix, versions)
            found[patch.name] = behaviour.decide_patch(
                patch.name,
                version,
                _judged(runs["new"], bug),
                _judged(runs["new"], other),
                kept=True,
                regressions=regressions,
                test=test,
            )
        timings["upstream tests"] = time.perf_counter() - mark
    locks: list[Path] = []
    if request.locks and not resume and new_series.patches:
        mark = time.perf_counter()
        try:
            locks = write_locks(new_series, out / "dist", progress)
        except OverlayError as exc:
            problems.append(f"locks: {exc.message}" + (f": {exc.found}" if exc.found else ""))
        timings["locks"] = time.perf_counter() - mark
    verdicts = [final_verdict(p, found.get(p.name), version) for p in plans]
    headers = {p.name: p for p in new_series.patches}
    verdicts = [flag_stale_header(v, headers.get(v.name), version) for v in verdicts]
    for verdict in verdicts:
        if verdict.action is Action.CONFLICT:
            problems.append(f"{verdict.name}: conflict ({'; '.join(verdict.plan.conflicts)})")
        b = verdict.behaviour
        if (
            verdict.action in (Action.CARRIED, Action.PORTED)
            and b is not None
            and b.outcome is not behaviour.Outcome.FAILS_BEFORE_PASSES_AFTER
        ):
            problems.append(f"{verdict.name}: {b.text}")
    if not request.behaviour:
        problems.append("behaviour not checked (--no-behaviour): not promotable")
    for move in moves:
        if move.new_patched != "right" and move.old_patched == "right":
            problems.append(f"{move.case}: right with the pinned build, {move.new_patched} now")
    timings["total"] = time.perf_counter() - started
    return Retarget(
        old_version=str(old.executorch),
        version=version,
        candidate=candidate,
        wheels=tuple(wheels),
        runtime=dict(runtime),
        attempts=tuple(attempts),
        verdicts=tuple(verdicts),
        runtime_form=runtime_form_note(verdicts, version),
        moves=tuple(moves),
        runs=runs,
        timings=timings,
        worktree=work if (work / ".git").exists() else None,
        resume=resume,
        fast=request.fast,
        problems=tuple(problems),
        wheel=matrix_wheel,
        release_tests=release_tests,
        locks=tuple(locks),
    )


def resolved(plan: TextPlan, work: Path, left: Sequence[str]) -> TextPlan:
    """Take what the work tree holds for a patch: a resolved conflict, or an edited patch.

    A patch's text there is its commit (named by its ``Overlay-Patch:`` trailer): every
    file it changes, as it left them, and its message. A patch the text alone would drop
    (its header names an upstream fix) but that stock still needed became a conflict
    only after behaviour, so any plan may take a commit; a carried or ported patch whose
    commit was amended by hand takes it too.
    """
    if plan.name in left:
        return replace(plan, action=Action.CONFLICT, conflicts=(f"{plan.name} does not apply",))
    commit = _commit_of(work, plan.name) if (work / ".git").is_dir() else None
    if commit is None:
        return plan
    changed = git(work, "diff-tree", "-r", "--no-commit-id", "--name-status", commit)
    entries = [line.split("\t", 1) for line in changed.splitlines() if line]
    added = [path for status, path in entries if status != "M"]
    if added:
        raise UpstreamError(
            f"the work tree commit of {plan.name} adds or removes files",
            expected="changes to files of the release (put a new test into an existing file)",
            found=", ".join(added),
            hint=f"amend commit {commit[:10]} in {work}, then resume again",
        )
    after = {p: decode(git_bytes(work, "show", f"{commit}:{p}")) for _, p in entries}
    kept = plan.action in (Action.CARRIED, Action.PORTED)
    if kept and after == plan.after:
        return plan
    source = f"{plan.source}, edited in the work tree" if kept else "3-way merge, resolved by hand"
    message = git(work, "log", "-1", "--format=%B", commit)
    return replace(plan, action=Action.PORTED, source=source, after=after, message=message)


def _commit_of(work: Path, name: str) -> str | None:
    """Return the work tree commit of patch ``name`` (by its trailer), if there is one."""
    log = git(work, "log", "--format=%H%x00%B%x01", f"{worktree.BASE_TAG}..HEAD")
    for entry in log.split("\x01"):
        commit, _, message = entry.strip("\n").partition("\x00")
        if f"\n{worktree.NAME_TRAILER}{name}" in f"\n{message.strip()}":
            return commit
    return None


def candidate_pristine(plans: Sequence[TextPlan], new_files: Mapping[str, bytes]) -> dict[str, str]:
    """Return the release's sha256 of every file the kept patches touch, sorted by path."""
    kept = [p for p in plans if p.action in (Action.CARRIED, Action.PORTED)]
    touched = {path for plan in kept for path in plan.after}
    return {path: sha256_bytes(new_files[path]) for path in sorted(touched)}


def _judged(run: behaviour.ReleaseRun, names: Sequence[str]) -> list[behaviour.CaseOutcome]:
    return [c for c in (run.case(n) for n in names) if c is not None]


def _plan_of(plans: Sequence[TextPlan], name: str) -> TextPlan:
    return next(p for p in plans if p.name == name)


def _with_behaviour(plan: TextPlan, found: behaviour.PatchBehaviour | None) -> TextPlan:
    """Let stock of the new release decide: drop what it no longer needs, keep what it does.

    A patch the text would drop (its header names an upstream fix) but whose trigger still
    fails on stock is kept: merged when git merges it, else a conflict to resolve by hand.
    """
    if found is None:
        return plan
    not_needed = (behaviour.Outcome.FIXED_ON_STOCK, behaviour.Outcome.NO_BUG_TRIGGER)
    if found.outcome in not_needed:
        return replace(plan, action=Action.DROP) if plan.action is not Action.DROP else plan
    if plan.action is Action.DROP and plan.status is not Status.CONTAINED:
        if plan.after and not plan.conflicts:
            return replace(plan, action=Action.PORTED, source="3-way merge")
        conflicts = plan.conflicts or (plan.merge_note,)
        return replace(plan, action=Action.CONFLICT, source="3-way merge", conflicts=conflicts)
    return plan


def write_candidate(
    series: Series,
    plans: Sequence[TextPlan],
    new_files: Mapping[str, bytes],
    *,
    version: str,
    out: Path,
    request: Request,
    pins_text: str,
) -> str:
    """Write ``<out>/patches`` (and ``<out>/worktree``); return the resume command or ""."""
    candidate, work = out / "patches", out / "worktree"
    if request.resume:
        (candidate / PINS_FILE).write_text(pins_text, encoding="utf-8")
        left = [p.name for p in plans if p.action is Action.CONFLICT]
        if left:
            return (
                f"{left[0]} does not apply on top of the resolved work tree {work}: apply it"
                f" by hand, then: python -m overlay retarget {version} --resume --out {out}"
            )
        worktree.regenerate(work, candidate, today=request.today)
        return ""
    for folder in (candidate, work):
        if folder.exists():
            shutil.rmtree(folder)
    candidate.mkdir(parents=True)
    (candidate / PINS_FILE).write_text(pins_text, encoding="utf-8")
    (candidate / SERIES_FILE).write_text(
        f"# Patch series against executorch {version}.\n", encoding="utf-8"
    )
    kept = [p for p in plans if p.action is not Action.DROP]
    if not kept:
        _empty_checksums(candidate)
        return ""
    write_worktree(series, plans, new_files, version, work)
    conflict = next((p for p in plans if p.action is Action.CONFLICT), None)
    if conflict is not None:
        # The committed patches before the conflict: a partial candidate to measure.
        if git(work, "rev-list", f"{worktree.BASE_TAG}..HEAD").strip():
            worktree.regenerate(work, candidate, today=request.today)
        else:
            _empty_checksums(candidate)
        return (
            f"resolve the conflict markers in {work} ({'; '.join(conflict.conflicts)});"
            f" the patch's header is the commit message in {work / '.git' / MERGE_MESSAGE}"
            f" (edit it to say what the resolution does), then:"
            f" python -m overlay retarget {version} --resume --out {out}"
        )
    worktree.regenerate(work, candidate, today=request.today)
    return ""


def write_locks(series: Series, dist: Path, progress: Progress) -> list[Path]:
    """Resolve the candidate's lock for every wheel it pins, as `nox -s lock` does for the pin.

    Each lock sits beside the candidate's pins (``locks/<tag>.txt``) and pins the patched
    wheel built from that release wheel by its sha256, so ``--promote`` carries the ready
    venv's exact contents with the series.
    """
    written = []
    for pin in series.pins.wheels:
        built = build_patched_wheel(series, fetch_wheel(pin), pin, dist)
        progress(f"resolving the lock for {pin.tag} with uv")
        found = lockfiles.generate(series, pin, built.path)
        lockfiles.check_wheel(found, built.path, built.sha256)
        written.append(found.path)
    return written


def _test_requirements(pins: Pins) -> tuple[str, ...]:
    return tuple(pins.upstream.get("test_requirements", ()))


def _cases(fast: bool, versions: Sequence[str]) -> list[str]:
    from overlay.equivalence import corpus

    triggers = set(behaviour.trigger_cases(versions))
    return [c.name for c in corpus.CASES if not fast or c.fast or c.name in triggers]


def _pinned_envs(series: Series, request: Request, progress: Progress) -> tuple[Path, Path]:
    """Return the pythons of stock and patched envs of the pinned release."""
    pins = series.pins
    pin = pins.matrix_pin(str(pins.executorch))
    source = fetch_wheel(pin)
    wheel = build_patched_wheel(series, source, pin, request.out_dir / "dist").path
    stock = release_venvs.ensure(
        release_venvs.release_spec(pins, "stock"), request.envs_root, progress=progress
    )
    patched = release_venvs.ensure(
        release_venvs.release_spec(pins, "patched", executorch=wheel),
        request.envs_root,
        progress=progress,
    )
    return stock.python, patched.python


def confirm_runtime(
    old: Pins,
    version: str,
    candidates: Sequence[PinCandidate],
    request: Request,
    progress: Progress,
) -> tuple[dict[str, str], list[PinAttempt], release_venvs.Env]:
    """Try runtime pin sets until a stock env of the release lowers (TOSA and VGF)."""
    attempts: list[PinAttempt] = []
    for candidate in candidates:
        started = time.perf_counter()
        spec = release_venvs.EnvSpec(
            name=f"executorch-{version}-stock",
            python=old.matrix_python,
            requirements=(
                f"executorch=={version}",
                *(f"{k}=={v}" for k, v in candidate.runtime.items()),
                *_test_requirements(old),
            ),
        )
        try:
            env = release_venvs.ensure(spec, request.envs_root, progress=progress)
            detail = lowering_check(env, version, request.out_dir / "logs" / "pin-check")
        except OverlayError as exc:
            detail = exc.message + (f": {exc.found}" if exc.found else "")
            env = None
        ok = env is not None and detail == ""
        attempts.append(
            PinAttempt(dict(candidate.runtime), ok, detail or "ok", time.perf_counter() - started)
        )
        progress(f"pins {candidate.origin}: {'ok' if ok else detail[:120]}")
        if ok and env is not None:
            return dict(candidate.runtime), attempts, env
    raise UpstreamError(
        f"no runtime pins lower executorch {version}",
        expected="one candidate whose stock env lowers a conv for TOSA and VGF",
        found="; ".join(f"{a.runtime}: {a.detail[:200]}" for a in attempts),
        hint="pass --torch VERSION (upstream's torch_pin.py for the release), or"
        " --upstream CLONE so it is read from there",
    )


LOWERING_CHECK_FILE = "overlay-lowering-check.json"


def lowering_check(env: release_venvs.Env, version: str, log_dir: Path) -> str:
    """Lower one corpus case in ``env`` (TOSA, numerics, VGF); return "" or the failure.

    The answer is kept in the env folder (the env is keyed by its requirements), so a
    re-run does not start a worker to learn it again.
    """
    saved = env.folder / LOWERING_CHECK_FILE
    key = {"case": LOWERING_CHECK_CASE, "env": env.spec.key}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads(saved.read_text(encoding="utf-8"))
        if data["key"] == key:
            return str(data["detail"])
    detail = _lowering_check(env, version, log_dir)
    saved.write_text(json.dumps({"key": key, "detail": detail}) + "\n", encoding="utf-8")
    return detail


def _lowering_check(env: release_venvs.Env, version: str, log_dir: Path) -> str:
    run = behaviour.run_release(
        version, str(env.python), None, [LOWERING_CHECK_CASE], out_dir=log_dir
    )
    result = run.results["stock"][LOWERING_CHECK_CASE]
    if not result.ok:
        return result.error.first_line if result.error else "the lowering failed"
    if result.vgf is not None and result.vgf.error is not None:
        return "VGF: " + _short_vgf_error(result.vgf.error.message)
    if result.numerics_error is not None:
        return "numerics: " + result.numerics_error.first_line
    return ""


def _short_vgf_error(message: str) -> str:
    for line in message.splitlines():
        if "GLIBC" in line or "not found" in line or "rejects" in line:
            return line.strip()[-200:]
    return message.strip().splitlines()[0][:200] if message.strip() else "failed"


def _empty_checksums(candidate: Path) -> None:
    """Write the SHA256SUMS of an empty series."""
    series = load_series(candidate)
    (candidate / CHECKSUMS_FILE).write_text(format_checksums(series, {}), encoding="utf-8")


def write_worktree(
    series: Series,
    plans: Sequence[TextPlan],
    new_files: Mapping[str, bytes],
    version: str,
    dest: Path,
) -> None:
    """Lay out the new pristine sources and one commit per kept patch (edit-style).

    Every file of the release's ``backends/arm`` is there, so a resolution may touch
    more than the patch did (a test beside the fix). At a conflict, the merged files
    with their markers are left uncommitted, the commit message (the patch's DEP-3
    header) is saved in ``.git/OVERLAY_MERGE_MSG`` and the patches still to come are
    recorded for ``--resume``.
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    for path in sorted(new_files):
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(new_files[path])
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--allow-empty", "-m", f"executorch {version} pristine sources")
    git(dest, "tag", worktree.BASE_TAG)
    by_name = {p.name: p for p in series.patches}
    for index, plan in enumerate(plans):
        if plan.action is Action.DROP:
            continue
        patch = by_name[plan.name]
        message = plan.message or worktree.commit_message(
            patch.name, patch.subject, patch.header_text
        )
        for path, text in plan.after.items():
            (dest / path).write_bytes(encode(text))
        if plan.action is Action.CONFLICT:
            (dest / ".git" / MERGE_MESSAGE).write_text(message, encoding="utf-8")
            state = {
                "version": version,
                "conflict": plan.name,
                "remaining": [p.name for p in plans[index + 1 :] if p.action is not Action.DROP],
            }
            (dest / ".git" / RESUME_STATE).write_text(json.dumps(state) + "\n", encoding="utf-8")
            return
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=message)


def resume_worktree(series: Series, dest: Path, new_files: Mapping[str, bytes]) -> list[str]:
    """Commit a resolved conflict and carry the remaining patches; return what is left.

    Each remaining patch is applied (at an offset if need be) on top of the work tree's
    HEAD; one that does not apply stops again like the first conflict.
    """
    state_path = dest / ".git" / RESUME_STATE
    if not (dest / ".git").is_dir():
        raise UpstreamError(
            f"{dest} has no retarget in progress",
            expected=f"a work tree with {state_path} (written at a conflict)",
            found="no work tree",
            hint="run `python -m overlay retarget VERSION` first",
        )
    marked = _marked_files(dest)
    if marked:
        raise UpstreamError(
            "conflict markers are still in the work tree",
            expected="every <<<<<<< ... >>>>>>> block resolved",
            found=", ".join(marked),
            hint="edit those files, then run the resume command again",
        )
    if not state_path.is_file():
        # Resumed before: a re-run measures the committed work tree again.
        if git(dest, "status", "--porcelain").strip():
            raise UpstreamError(
                f"uncommitted changes in {dest}, and no conflict to commit them to",
                expected="a clean work tree (every patch is a commit)",
                found=git(dest, "status", "--short").strip()[:500],
                hint="amend the commit of the patch you changed (`git commit --amend`),"
                " then resume again",
            )
        return []
    state = json.loads(state_path.read_text(encoding="utf-8"))
    if git(dest, "status", "--porcelain").strip():
        message = (dest / ".git" / MERGE_MESSAGE).read_text(encoding="utf-8")
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=message)
    remaining: list[str] = list(state["remaining"])
    tracked = set(_tracked(dest))
    texts: dict[str, str] = {}
    for position, name in enumerate(remaining):
        patch = series.get(name)
        for path in patch.targets:
            if path in texts:
                continue
            if path in tracked:
                texts[path] = decode(git_bytes(dest, "show", f"HEAD:{path}"))
            elif path in new_files:
                texts[path] = decode(new_files[path])
        message = worktree.commit_message(patch.name, patch.subject, patch.header_text)
        try:
            after = apply_patch(patch, texts, allow_offset=True)
        except HunkMismatchError:
            state["conflict"], state["remaining"] = name, remaining[position + 1 :]
            (dest / ".git" / MERGE_MESSAGE).write_text(message, encoding="utf-8")
            state_path.write_text(json.dumps(state) + "\n", encoding="utf-8")
            return [name]
        for path in patch.targets:
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(encode(after[path]))
        texts.update(after)
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=message)
    state_path.unlink()
    return []


def _marked_files(dest: Path) -> list[str]:
    """Return the files of the work tree that still hold a conflict marker."""
    found = []
    for path in _tracked(dest) + _untracked(dest):
        try:
            text = (dest / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.startswith("<<<<<<< ") for line in text.splitlines()):
            found.append(path)
    return found


def _tracked(dest: Path) -> list[str]:
    return [p for p in git(dest, "ls-files").splitlines() if p]


def _untracked(dest: Path) -> list[str]:
    return [p for p in git(dest, "ls-files", "--others", "--exclude-standard").splitlines() if p]


def final_verdict(
    plan: TextPlan, found: behaviour.PatchBehaviour | None, version: str
) -> PatchVerdict:
    """Combine a patch's text plan and its behaviour on the new release (pure)."""
    flags: list[str] = []
    fix = fixes.by_patch(plan.name)
    patch_note = _upstream_ref(plan)
    if found is None:
        text = f"{plan.action.value} ({plan.source}); behaviour not checked"
        if plan.action is Action.CONFLICT:
            text = f"conflict: {'; '.join(plan.conflicts)}"
        return PatchVerdict(plan.name, plan.action, text, plan, None, tuple(flags))
    outcome = found.outcome
    not_needed = outcome in (behaviour.Outcome.FIXED_ON_STOCK, behaviour.Outcome.NO_BUG_TRIGGER)
    if not_needed:
        action = Action.DROP
        if outcome is behaviour.Outcome.FIXED_ON_STOCK:
            text = found.text + patch_note
        else:
            text = f"drop: {found.text}{patch_note}"
        if plan.action in (Action.CARRIED, Action.PORTED):
            flags.append(
                f"text says {plan.action.value} ({plan.source}) but no trigger case differs"
                f" on stock {version}: redundant, or its bug is not covered by a case"
            )
    else:
        action = plan.action
        text = f"{plan.action.value} ({plan.source}): {found.text}"
        if plan.action is Action.DROP and plan.status is not Status.CONTAINED:
            flags.append(
                f"text says drop ({plan.source}) but stock {version} still fails its"
                f" trigger cases: {found.text}"
            )
            kept = _with_behaviour(plan, found)
            action = kept.action
            text = f"{action.value} ({kept.source}): {found.text}"
            if kept.conflicts:
                text += f"; {'; '.join(kept.conflicts)}"
    if fix is None:
        flags.append("no fix module in overlay/fixes/: no trigger cases to check")
    return PatchVerdict(plan.name, action, text, plan, found, tuple(flags))


def flag_stale_header(verdict: PatchVerdict, kept: Patch | None, version: str) -> PatchVerdict:
    """Flag a kept patch whose header still says upstream fixed it by ``version``.

    The export sends no patch that names an upstream fix, so such a header (carried
    over from the pinned patch, or left in a resolved conflict's commit message) must
    be rewritten to say what the kept text fixes.
    """
    if kept is None or verdict.action not in (Action.CARRIED, Action.PORTED):
        return verdict
    info = parse_applied_upstream(kept.header.get("Applied-Upstream", ""))
    if not info.text or (info.version is not None and Version(info.version) > Version(version)):
        return verdict
    flag = (
        f"kept on {version}, yet its header says Applied-Upstream: {info.text}: rewrite the"
        " header (the commit message in the work tree) to say what it fixes on this"
        " release; the export sends no patch that names an upstream fix"
    )
    return replace(verdict, flags=(*verdict.flags, flag))


def _upstream_ref(plan: TextPlan) -> str:
    if not plan.source.startswith("Applied-Upstream"):
        return ""
    return f" ({plan.source})"


def runtime_form_note(verdicts: Sequence[PatchVerdict], version: str) -> str:
    """Say whether ``overlay.runtime`` can patch the new release, fix by fix (pure)."""
    kept = [v for v in verdicts if v.action in (Action.CARRIED, Action.PORTED)]
    if not kept:
        return f"nothing is kept on {version}: no runtime form is needed"
    lines = []
    for verdict in kept:
        fix = fixes.by_patch(verdict.name)
        if fix is None:
            lines.append(f"{verdict.name}: not in the fix registry: no runtime form")
            continue
        declared = fix.runtime.get(version)
        if declared is not None:
            forms = fix.runtime_forms(version)
            what = declared.text if isinstance(declared, DiffOnly) else forms[0].qualname
            lines.append(f"{verdict.name}: its fix module declares {version}: {what}")
            continue
        written = [(line, f) for line in fix.runtime for f in fix.runtime_forms(line)]
        if not written:
            lines.append(f"{verdict.name}: no runtime form on any line: the diff is its only form")
            continue
        line, form = max(written, key=lambda pair: Version(pair[0]))
        files = set(verdict.plan.after)
        if files != set(fix.repo_paths):
            lines.append(
                f"{verdict.name}: no runtime form on {version}: the fix now changes"
                f" {', '.join(sorted(files))}, while its {line} runtime form replaces"
                f" {form.qualname} in {form.repo_path}; the diff-patched build is the only"
                f" form there (declare DiffOnly for {version} in its fix module)"
            )
        else:
            lines.append(
                f"{verdict.name}: its {line} runtime form replaces {form.attribute}; check the"
                f" function is unchanged on {version}, then key a form for {version} in its"
                " fix module (overlay.runtime applies forms per line)"
            )
    return "\n".join(lines)


def case_moves(old: behaviour.ReleaseRun, new: behaviour.ReleaseRun) -> list[CaseMove]:
    """Compare the pinned patched build with the new one, case by case (pure)."""
    moves = []
    for name in new.results["stock"]:
        if name not in old.results["stock"]:
            continue
        so, sn = old.results["stock"][name], new.results["stock"][name]
        po = old.results.get("patched", {}).get(name, so)
        pn = new.results.get("patched", {}).get(name, sn)
        moves.append(_move(name, (so, po), (sn, pn), new.release))
    return moves


def _move(
    name: str,
    old: tuple[ItemResult, ItemResult],
    new: tuple[ItemResult, ItemResult],
    release: str,
) -> CaseMove:
    """Judge one case: (stock, patched) on the pinned and on the new release."""
    from overlay.equivalence import corpus

    (so, po), (sn, pn) = old, new
    info = corpus.info(name)
    qo = behaviour.judge_case(info, so, po).patched
    qn = behaviour.judge_case(info, sn, pn).patched
    changes = compare(po, pn)
    patch_old = bool(compare(so, po))
    patch_new = bool(compare(sn, pn))
    if not changes:
        attribution, note = "no change", "same result"
    elif not patch_old and not patch_new:
        attribution, note = "upstream change", "the patches touch this case on neither release"
    elif patch_old and not patch_new:
        attribution = "patch"
        note = f"the pinned patches changed this case; on {release} nothing kept does"
    elif not patch_old and patch_new:
        attribution, note = "patch", f"a kept patch changes this case on {release}"
    else:
        attribution, note = "upstream change and patch", "both releases patch this case"
    quality_old = qo.value if qo else "?"
    quality_new = qn.value if qn else "?"
    if quality_old != quality_new:
        note += f"; {quality_old} -> {quality_new}"
    return CaseMove(
        name, quality_old, quality_new, tuple(c.value for c in changes), attribution, note
    )


def write_report(result: Retarget, out_dir: Path, texts: Mapping[str, str]) -> list[Path]:
    """Write ``retarget.{txt,md,json}`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in texts.items():
        path = out_dir / f"{REPORT_STEM}.{suffix}"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# --- promote -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Promotion:
    """What ``promote`` moved."""

    old_version: str
    version: str
    archive: Path
    written: tuple[str, ...]


def promote(out_dir: Path, patches_dir: Path) -> Promotion:
    """Make a checked candidate the pinned series; keep the old one in ``archive/``."""
    report_path = out_dir / f"{REPORT_STEM}.json"
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UpstreamError(
            f"no retarget report in {out_dir}",
            expected=str(report_path),
            found=str(exc),
            hint="run `python -m overlay retarget VERSION --out DIR` first",
        ) from exc
    if not report.get("ready"):
        raise UpstreamError(
            "the candidate is not ready to promote",
            expected="a retarget report with no problems",
            found="; ".join(report.get("problems", [])) or "ready = false",
            hint="fix what the report says (or re-run retarget without --no-behaviour)",
        )
    candidate = out_dir / "patches"
    new_series = load_series(candidate)
    old_series = load_series(patches_dir)
    try:
        for pin in new_series.pins.wheels:
            lockfiles.check_current(new_series, pin)
    except OverlayError as exc:
        raise UpstreamError(
            "the candidate has no current lock for every wheel it pins",
            expected=f"{candidate / lockfiles.LOCKS_DIR}/<tag>.txt for each [[wheels]] entry",
            found=exc.message,
            hint=f"run `python -m overlay --patches {candidate} lock`, or the retarget again"
            " without --no-locks",
        ) from exc
    old_version = str(old_series.pins.executorch)
    if new_series.pins.executorch <= old_series.pins.executorch:
        raise UpstreamError(
            f"the candidate (executorch {new_series.pins.executorch}) is not newer than the pin",
            expected=f"a candidate for a release after {old_version}",
            found=str(new_series.pins.executorch),
            hint="it was promoted already; `git log patches/` shows when",
        )
    archive = patches_dir / ARCHIVE_DIR / old_version
    if archive.exists():
        raise UpstreamError(
            f"{archive} already exists",
            expected="no archived series for this release yet",
            found="an archive folder",
            hint="move it away if it is stale, then promote again",
        )
    archive.mkdir(parents=True)
    moved = [SERIES_FILE, PINS_FILE, CHECKSUMS_FILE, *(p.name for p in old_series.patches)]
    for name in moved:
        if (patches_dir / name).exists():
            shutil.copy2(patches_dir / name, archive / name)
    old_locks = patches_dir / lockfiles.LOCKS_DIR
    if old_locks.is_dir():
        shutil.copytree(old_locks, archive / lockfiles.LOCKS_DIR)
    load_series(archive)  # the archive must load on its own (usable with --patches)
    for name in moved:
        (patches_dir / name).unlink(missing_ok=True)
    if old_locks.is_dir():
        shutil.rmtree(old_locks)
    written = []
    for name in [SERIES_FILE, PINS_FILE, CHECKSUMS_FILE, *(p.name for p in new_series.patches)]:
        shutil.copy2(candidate / name, patches_dir / name)
        written.append(name)
    shutil.copytree(candidate / lockfiles.LOCKS_DIR, old_locks)
    written += [f"{lockfiles.LOCKS_DIR}/{p.name}" for p in sorted(old_locks.iterdir())]
    load_series(patches_dir)
    return Promotion(old_version, str(new_series.pins.executorch), archive, tuple(written))
