"""The candidate series folder (``<out>/patches``: series, patches, SHA256SUMS, pins.toml,
upstream.toml, locks pinning the patched wheels by sha256), which any command takes with
``--patches`` and ``--promote`` copies."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from overlay import worktree
from overlay._git import git
from overlay._hashing import sha256_file
from overlay.distribution.wheels import build_patched_wheel, fetch_wheel
from overlay.envs import lockfiles
from overlay.errors import OverlayError
from overlay.lines.pins import PINS_FILE, SERIES_FILE, Pins, WheelPin
from overlay.text.series import CHECKSUMS_FILE, Series, format_checksums, load_series
from overlay.upstream.results import PinAttempt
from overlay.upstream.retarget.conflicts import MERGE_MESSAGE, commit_plans
from overlay.upstream.retarget.retarget_verdict import TextPlan, WheelRecord, conflict_text
from overlay.upstream.upstream_pins import UPSTREAM_FILE, UpstreamPins

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Layout:
    """Where one retarget writes: the candidate series and the git work tree."""

    out: Path
    version: str

    @property
    def candidate(self) -> Path:
        """Return the candidate series folder."""
        return self.out / "patches"

    @property
    def work(self) -> Path:
        """Return the git work tree."""
        return self.out / "worktree"

    def resume_command(self) -> str:
        """Return the command that continues after a resolution."""
        return f"executorch-arm-overlay retarget {self.version} --resume --out {self.out}"


def render_pins(
    old: Pins,
    *,
    version: str,
    runtime: Mapping[str, str],
    wheels: Sequence[WheelRecord],
    pristine: Mapping[str, str],
    attempts: Sequence[PinAttempt],
) -> str:
    """Return the candidate's ``pins.toml`` text."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Pins of the executorch {version} line, written as a candidate by"))
    doc.add(tomlkit.comment("`python -m overlay retarget`. Code holds no version or hash."))
    doc.add(tomlkit.nl())
    doc.add("executorch", version)
    doc.add("upstream_repo", old.upstream_repo)
    doc.add("package_dir", old.package_dir)
    if old.macos_deployment_target:
        doc.add("macos_deployment_target", old.macos_deployment_target)
    table = tomlkit.table()
    table.add(tomlkit.comment("Checked in a fresh stock env (kernels and a lowering). Tried:"))
    for attempt in attempts:
        pins = ", ".join(f"{k} {v}" for k, v in attempt.runtime.items())
        state = "ok" if attempt.ok else "failed: " + attempt.detail.replace("\n", " ")[:150]
        table.add(tomlkit.comment(f"  {pins}: {state}"))
    for name, value in runtime.items():
        table.add(name, value)
    doc.add("runtime", table)
    extras = {k: [n for n in v if n in runtime] for k, v in old.extras.items()}
    if any(extras.values()):
        table = tomlkit.table()
        table.add(tomlkit.comment("The patched wheel's extras (as pinned), e.g. executorch[arm]."))
        for extra, names in extras.items():
            if names:
                table.add(extra, names)
        doc.add("extras", table)
    published = tomlkit.aot()
    for wheel in wheels:
        if wheel.sha256:
            entry = tomlkit.table()
            for key in ("file", "sha256", "python", "platform"):
                entry.add(key, getattr(wheel, key))
            published.append(entry)
    doc.add(tomlkit.nl())
    doc.add(tomlkit.comment("sha256 of the wheel files (pip checked each against the index)."))
    for wheel in wheels:
        if not wheel.sha256:
            doc.add(tomlkit.comment(f"not published: {wheel.file}"))
    if published:
        doc.add("wheels", published)
    table = tomlkit.table()
    table.add(tomlkit.comment("sha256 of every pristine file the series touches."))
    for path, digest in pristine.items():
        table.add(path, digest)
    doc.add("pristine", table)
    return tomlkit.dumps(doc)


def write_candidate(
    plans: Sequence[TextPlan],
    new_files: Mapping[str, bytes],
    *,
    layout: Layout,
    resume: bool,
    today: str,
    pins_text: str,
    upstream_text: str = "",
) -> str:
    """Write the candidate series (and the work tree); return the resume command or "".

    ``resume``: the work tree holds the patches up to a resolved conflict; the plans it
    lacks are committed on top of them.
    """
    candidate, work = layout.candidate, layout.work
    if not resume:
        for folder in (candidate, work):
            if folder.exists():
                shutil.rmtree(folder)
        candidate.mkdir(parents=True)
        (candidate / SERIES_FILE).write_text(
            f"# Patch series against executorch {layout.version}.\n", encoding="utf-8"
        )
        work.mkdir(parents=True)
        worktree.lay_out_base(new_files, layout.version, work)
    (candidate / PINS_FILE).write_text(pins_text, encoding="utf-8")
    if upstream_text:
        (candidate / UPSTREAM_FILE).write_text(upstream_text, encoding="utf-8")
    conflict = commit_plans(plans, work)
    if git(work, "rev-list", f"{worktree.BASE_TAG}..HEAD").strip():
        worktree.regenerate(work, candidate, today=today)
    else:  # nothing kept yet: the SHA256SUMS of an empty series
        series = load_series(candidate)
        (candidate / CHECKSUMS_FILE).write_text(format_checksums(series, {}), encoding="utf-8")
    if conflict is None:
        return ""
    return (
        f"resolve the conflict markers in {work} ({conflict_text(conflict.replayed.own)});"
        f" the patch's header is the commit message in {work / '.git' / MERGE_MESSAGE}"
        f" (edit it to say what the resolution does), then: {layout.resume_command()}"
    )


def write_locks(series: Series, dist: Path, progress: Progress) -> list[Path]:
    """Resolve the candidate's lock for every wheel it pins, as `nox -s lock` does for a line.

    Each lock sits beside the candidate's pins (``locks/<tag>.txt``) and pins the patched
    wheel built from that release wheel by its sha256.
    """
    written = []
    for pin in series.pins.wheels:
        built = build_patched_wheel(series, fetch_wheel(pin), pin, dist)
        progress(f"resolving the lock for {pin.tag} with uv")
        found = lockfiles.generate(series, pin, built.path)
        lockfiles.check_wheel(found, built.path, built.sha256)
        written.append(found.path)
    return written


def fetch_release_wheels(
    pins: Pins, shared: UpstreamPins, version: str, progress: Progress = lambda _: None
) -> list[WheelRecord]:
    """Download the release's wheel for every interpreter/platform the line pins.

    pip checks each file against the sha256 the index publishes; the matrix wheel also
    against ``upstream.toml`` when recorded. A wheel the release does not publish is
    recorded with an empty sha256 and the reason.
    """
    records = []
    for pin in pins.wheels:
        name = pin.file.replace(f"-{pins.executorch}-", f"-{version}-", 1)
        known = shared.sha256.get(version, "") if shared.is_matrix(pin) else ""
        try:
            path = fetch_wheel(WheelPin(name, known, pin.python, pin.platform))
        except OverlayError as exc:
            records.append(WheelRecord(name, "", pin.python, pin.platform, exc.message))
            progress(f"{name}: not published ({exc.message})")
            continue
        digest = sha256_file(path)
        records.append(WheelRecord(name, digest, pin.python, pin.platform))
        progress(f"{name}: sha256 {digest[:12]}")
    return records
