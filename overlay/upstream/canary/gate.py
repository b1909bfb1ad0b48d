"""The idempotent export gate: regenerating a line and exporting its mboxes changes no byte,
with the user's git config and a hostile one (set through ``GIT_CONFIG_GLOBAL``, one check at a
time: the canary is single-threaded); ``patches/`` is never written."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from overlay import worktree
from overlay.errors import OverlayError
from overlay.text.applier import apply_patch, decode
from overlay.text.series import Series, load_series
from overlay.upstream.canary.canary_report import Gate, GateCheck
from overlay.upstream.commit_rules import Identity
from overlay.upstream.export import export_patch

HOSTILE_GITCONFIG = """\
[user]
\tname = Hostile Config
\temail = hostile@example.org
[core]
\tabbrev = 7
\tautocrlf = true
\tquotePath = false
[diff]
\tnoprefix = true
\tmnemonicPrefix = true
\trenames = copies
\talgorithm = histogram
\tcontext = 5
\tinterHunkContext = 4
\tstatGraphWidth = 20
[format]
\tsignature = hostile signature
\tnumbered = true
[color]
\tui = always
[init]
\tdefaultBranch = trunk
[commit]
\tverbose = true
[log]
\tdecorate = full
"""
GATE_SIGNER = Identity("Canary Gate", "canary-gate@localhost")
_ARM_YEAR = re.compile(r"Copyright[^\n]*?(\d{4})\s+Arm", re.IGNORECASE)


@contextlib.contextmanager
def global_git_config(path: Path | None) -> Iterator[None]:
    """Use ``path`` as the global git config (None: leave the user's) inside the block."""
    if path is None:
        yield
        return
    saved = os.environ.get("GIT_CONFIG_GLOBAL")
    os.environ["GIT_CONFIG_GLOBAL"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("GIT_CONFIG_GLOBAL", None)
        else:
            os.environ["GIT_CONFIG_GLOBAL"] = saved


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _changed(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


def regenerated(series: Series, sources: Mapping[str, bytes], scratch: Path) -> list[str]:
    """Return the files of the line that ``create`` + ``regenerate`` change (empty: none)."""
    copy = scratch / "line"
    shutil.copytree(series.directory, copy, ignore=shutil.ignore_patterns("locks"))
    before = _folder_bytes(copy)
    worktree.create(series, dict(sources), scratch / "worktree")
    worktree.regenerate(scratch / "worktree", copy)
    return _changed(before, _folder_bytes(copy))


def _year(series: Series, sources: Mapping[str, bytes], name: str) -> int | None:
    patch = series.get(name)
    texts = {p: decode(sources[p]) for p in patch.targets if p in sources}
    try:
        after = apply_patch(patch, texts, allow_offset=True)
    except OverlayError:
        return None
    years = [int(y) for text in after.values() for y in _ARM_YEAR.findall(text[:2000])]
    return max(years, default=None)


def exported(series: Series, sources: Mapping[str, bytes], base_commit: str) -> dict[str, str]:
    """Return each patch's mbox (or why the export refused it), keyed by patch name.

    The subject's verb is not checked here (the gate checks bytes; ``export-upstream``
    checks the wording against upstream's hook).
    """
    out = {}
    for patch in series.patches:
        try:
            item = export_patch(
                patch,
                sources,
                signer=GATE_SIGNER,
                base_commit=base_commit,
                year=_year(series, sources, patch.name),
            )
        except OverlayError as exc:
            out[patch.name] = f"refused: {exc.message}: {exc.found}"
            continue
        out[patch.name] = item.mbox
    return out


def _check(name: str, changed: list[str], what: str) -> GateCheck:
    if changed:
        return GateCheck(name, False, f"{what} changed: {', '.join(changed)}")
    return GateCheck(name, True)


def run_gate(
    series_dir: Path, sources: Mapping[str, bytes], base_commit: str, scratch: Path
) -> Gate:
    """Run the four checks on the line in ``series_dir`` (``sources``: its base files)."""
    series = load_series(series_dir)
    hostile = scratch / "hostile.gitconfig"
    hostile.parent.mkdir(parents=True, exist_ok=True)
    hostile.write_text(HOSTILE_GITCONFIG, encoding="utf-8")
    checks = []
    for label, config in (("your git config", None), ("a hostile git config", hostile)):
        with global_git_config(config), tempfile.TemporaryDirectory(dir=scratch) as tmp:
            try:
                changed = regenerated(series, sources, Path(tmp))
            except OverlayError as exc:
                checks.append(GateCheck(f"regenerate ({label})", False, str(exc)))
                continue
        checks.append(_check(f"regenerate ({label})", changed, "regenerating the series"))
    first = exported(series, sources, base_commit)
    second = exported(series, sources, base_commit)
    checks.append(_check("export twice", _changed(first, second), "the mboxes"))
    with global_git_config(hostile):
        third = exported(series, sources, base_commit)
    checks.append(_check("export (a hostile git config)", _changed(first, third), "the mboxes"))
    refused = [f"{n}: {t}" for n, t in first.items() if t.startswith("refused: ")]
    if refused:
        checks.append(GateCheck("export refusals (not churn)", True, "; ".join(refused)))
    return Gate(all(c.ok for c in checks), tuple(checks))
