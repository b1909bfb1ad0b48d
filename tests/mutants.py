"""Break the code once per mutation and check the fast tests go red: ``nox -s mutants``.

Each mutation is one exact text replacement in a module; the installed package is rebuilt
with it, the fast suite runs (``-x``), and the module is restored. A mutation the suite
survives is a test gap: the script lists it and exits 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "executorch-arm-overlay"
# (name, module, original text, replacement): each original must occur exactly once.
MUTATIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "applier: hunks may overlap",
        "overlay/text/applier.py",
        "if not _matches(lines, at, hunk.old) or at < cursor:",
        "if not _matches(lines, at, hunk.old):",
    ),
    (
        "applier: CRLF files not adapted",
        "overlay/text/applier.py",
        'if _eol_of(file_lines) != "\\r\\n":',
        "if True:",
    ),
    ("applier: result not checked", "overlay/text/applier.py", "if found != wanted:", "if False:"),
    (
        "install: drifted files allowed",
        "overlay/target/plan.py",
        "if r.state in (FileState.DRIFTED, FileState.MISSING)",
        "if False",
    ),
    (
        "install: symlinks followed",
        "overlay/target/locate.py",
        "    if path.is_symlink():\n        raise UnsafePatchError(",
        "    if False:\n        raise UnsafePatchError(",
    ),
    (
        "series: no round-trip check",
        "overlay/text/series.py",
        "if str(patch_set) != normalize_counts(diff):",
        "if False:",
    ),
    (
        "series: mode changes accepted",
        "overlay/text/series.py",
        '    "old mode ": "changes the file mode of",\n'
        '    "new mode ": "changes the file mode of",',
        "",
    ),
    (
        "pins: local version compared whole",
        "overlay/lines/pins.py",
        "Version(found.public) != self.executorch",
        "found != self.executorch",
    ),
    (
        "wheels: METADATA version kept",
        "overlay/dist/provenance.py",
        "text = set_metadata_version(metadata, local_version(series, fixes), where=where)",
        "text = metadata",
    ),
    (
        "verdict: any change is fixed",
        "overlay/equivalence/verdict.py",
        "    if qa is not Quality.RIGHT and qb is Quality.RIGHT:\n        return AB.FIXED",
        "    if True:\n        return AB.FIXED",
    ),
    (
        "verdict: numbers never wrong",
        "overlay/equivalence/verdict.py",
        "if err is None or err > bounds.tolerance * scale + ABSOLUTE_FLOOR:",
        "if False:",
    ),
    (
        "verdict: SQNR floor ignored",
        "overlay/equivalence/verdict.py",
        "low = bounds.sqnr_db is not None and (sqnr is None or sqnr < bounds.sqnr_db)",
        "low = False",
    ),
    (
        "verdict: wrong on every path is no finding",
        "overlay/equivalence/verdict.py",
        "        if all(q is not Quality.RIGHT for q in seen):",
        "        if False:",
    ),
    (
        "verdict: an expected breakage holds on every release",
        "overlay/equivalence/verdict.py",
        "not fixes.release_matches(info.broken_releases, version)",
        "False",
    ),
    (
        "orchestrator: the default run takes the whole zoo",
        "overlay/equivalence/controller/orchestrator.py",
        'return case.group == "core" or (options.fast and case.fast)',
        "return True",
    ),
    (
        "vgf_run: layer manifests rewritten in place (a loader can read them torn)",
        "overlay/equivalence/worker/vgf_run.py",
        'write_text_atomic(target / f"{stem}.json", json.dumps(data, indent=2))',
        '(target / f"{stem}.json").write_text(json.dumps(data, indent=2), encoding="utf-8")',
    ),
    (
        "workers: a case's own timeout ignored",
        "overlay/equivalence/controller/processes.py",
        "limit = timeout or self.timeout",
        "limit = self.timeout",
    ),
    (
        "codec: unknown fields accepted",
        "overlay/codec.py",
        "    if unknown:\n        raise",
        "    if False:\n        raise",
    ),
    (
        "orchestrator: no restart after a crash",
        "overlay/equivalence/controller/processes.py",
        "        if self.worker is None:\n            self.start()",
        "        if False:\n            self.start()",
    ),
    (
        "cli: check command gone",
        "overlay/cli/in_place.py",
        '        "check",\n        cmd_check,',
        '        "check-x",\n        cmd_check,',
    ),
    (
        "install_check: version not checked",
        "overlay/target/state.py",
        "if self.target.version != Version(local_version(series)):",
        "if False:",
    ),
    (
        "_dist: RECORD errors swallowed",
        "overlay/dist/distinfo.py",
        "csv.Error) as exc:\n        raise TargetError(",
        "csv.Error) as exc:\n        return ()\n        raise TargetError(",
    ),
    (
        "worktree: Last-Update not touched",
        "overlay/worktree.py",
        "            header = _touch_last_update(header, day)",
        "            pass",
    ),
    (
        "export: long lines allowed",
        "overlay/upstream/commit_rules.py",
        'if len(_URL.sub("", line)) > MAX_LINE:',
        "if False:",
    ),
    (
        "retarget: a resolution keeps only the patch's own files",
        "overlay/upstream/retarget/conflicts.py",
        "for _, p in entries}",
        "for _, p in entries if p in plan.after}",
    ),
    (
        "upstream verdicts: any failure before counts, whatever its reason",
        "overlay/upstream/verdicts.py",
        "    if text.startswith(_OWN) and not text.startswith(_NOT_OWN):\n        return True",
        "    if True:\n        return True",
    ),
)


def _reinstall() -> None:
    subprocess.run(
        ["uv", "pip", "install", "--quiet", "--python", sys.executable, "--no-deps",
         "--reinstall-package", PROJECT, str(ROOT)],
        check=True,
    )  # fmt: skip


def run_one(name: str, module: str, old: str, new: str) -> str:
    """Apply one mutation, run the fast suite, restore; return the outcome line."""
    path = ROOT / module
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        return f"stale mutation: the text occurs {text.count(old)} times in {module}"
    path.write_text(text.replace(old, new), encoding="utf-8")
    try:
        _reinstall()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
             "-m", "not integration and not torch", "--rootdir", str(ROOT)],
            cwd=ROOT / "tests", capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        path.write_text(text, encoding="utf-8")
    failed = [
        line[len("FAILED ") :] for line in proc.stdout.splitlines() if line.startswith("FAILED")
    ]
    if proc.returncode == 0:
        return "SURVIVED (a test gap)"
    return "killed by " + (failed[0].split(" - ")[0] if failed else f"exit {proc.returncode}")


def main() -> int:
    """Run every mutation; return 1 if any survived or went stale."""
    outcomes = []
    try:
        for name, module, old, new in MUTATIONS:
            outcome = run_one(name, module, old, new)
            outcomes.append(outcome)
            sys.stdout.write(f"{name:42} {outcome}\n")
            sys.stdout.flush()
    finally:
        _reinstall()
    return 0 if all(o.startswith("killed") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
