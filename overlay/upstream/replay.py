"""The one replay engine: a line's series, and its ports (a newer line's patch of the same
number), on one base, patch by patch: the strict applier, the earlier ones carried; where
it conflicts and the patch's own base is known (a :class:`Step`), git's 3-way merge."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from packaging.version import Version
from unidiff.patch import PatchedFile

from overlay import lines
from overlay._git import merge_file
from overlay.text.applier import (
    HunkMismatchError,
    apply_file,
    apply_patch,
    apply_to,
    decode,
    encode,
)
from overlay.text.file_diffs import creates
from overlay.text.series import Patch, Series, load_series
from overlay.upstream.results import (
    APPLYING,
    CARRIED,
    RANK,
    Applied,
    Conflict,
    Evidence,
    OnBase,
    Status,
)

ARM_PREFIX = "backends/arm/"
CONTEXT_LINES = 3  # around a conflict region
MARKER = "<<<<<<< "
Texts = dict[str, str]
Ports = Mapping[str, Mapping[int, Patch]]  # newer line -> fix number -> its patch


@dataclass(frozen=True)
class Step:
    """A patch on its own line's base: the files before and after it (the merge's base, theirs)."""

    before: Mapping[str, str]
    after: Mapping[str, str]


@dataclass(frozen=True)
class Carry:
    """One patch replayed: its result, the patch the base now carries (if any), the texts
    after it (carried, a merge's conflict markers, or unchanged)."""

    replayed: OnBase
    carrier: Patch | None  # the line's own patch, its port, or None (not on the base)
    after: Texts


def _hunk_states(text: str, patched_file: PatchedFile) -> list[str]:
    """Classify each hunk alone: ``applies``, ``contained`` or ``conflicts``."""
    states = []
    for hunk in patched_file:
        one = PatchedFile(source=patched_file.source_file, target=patched_file.target_file)
        one.append(hunk)
        state = "conflicts"
        for reverse, name in ((False, "applies"), (True, "contained")):
            try:
                apply_file(text, one, reverse=reverse, allow_offset=True)
            except HunkMismatchError:
                continue
            state = name
            break
        states.append(state)
    return states


def check_file(text: str | None, patched_file: PatchedFile, names: Collection[str]) -> Applied:
    """Try one file diff on one base file (None: not on the base); a created file applies
    where the base lacks it, is contained where it holds the same, else conflicts."""
    path = str(patched_file.path)
    if creates(patched_file):
        return _check_creation(text, patched_file)
    if text is None:
        base = PurePosixPath(path).name
        moved = sorted(
            n for n in names if n.startswith(ARM_PREFIX) and PurePosixPath(n).name == base
        )
        if moved:
            return Applied(Status.MOVED, f"{path} -> {', '.join(moved)}")
        return Applied(Status.MISSING, f"{path} is not on the base")
    first_bad = 0
    for reverse, offset in ((False, False), (True, False), (False, True), (True, True)):
        try:
            offsets = apply_file(text, patched_file, reverse=reverse, allow_offset=offset).offsets
        except HunkMismatchError as exc:
            first_bad = exc.hunk if (reverse, offset) == (False, True) else first_bad
            continue
        if reverse:
            detail = "the reverse diff applies" + (" at an offset" if offset else "")
            return Applied(Status.CONTAINED, detail, evidence=_REVERSE)
        if not offset:
            return Applied(Status.APPLIES)
        return Applied(Status.OFFSET, ",".join(f"{o:+d}" for o in offsets) + " lines", offsets)
    states = _hunk_states(text, patched_file)
    summary = ", ".join(f"{n} {s}" for n, s in enumerate(states, start=1))
    return Applied(Status.CONFLICT, f"hunk {first_bad}/{len(states)} fails in {path} ({summary})")


_REVERSE = (Evidence("reverse applies"),)


def _check_creation(text: str | None, patched_file: PatchedFile) -> Applied:
    if text is None:
        return Applied(Status.APPLIES)
    try:
        apply_to(text, patched_file, reverse=True)
    except HunkMismatchError:
        return Applied(Status.CONFLICT, f"{patched_file.path} exists on the base, with other text")
    return Applied(Status.CONTAINED, f"{patched_file.path} exists on the base", evidence=_REVERSE)


def check_patch(
    patch: Patch, texts: Mapping[str, str], names: Collection[str]
) -> tuple[Applied, Texts]:
    """Try a whole patch; return its result and the texts after it (changed only if it applies)."""
    checks = [check_file(texts.get(f.path), f, names) for f in patch.files]
    statuses = {c.status for c in checks}
    worst = max(checks, key=lambda c: RANK[c.status])
    if statuses <= APPLYING:
        offsets = tuple(o for c in checks for o in c.offsets)
        return Applied(worst.status, worst.detail, offsets), apply_patch(
            patch, texts, allow_offset=True
        )
    joined = "; ".join(
        f"{f.path}: {c.status.value} {c.detail}".strip()
        for f, c in zip(patch.files, checks, strict=True)
    )
    if len(statuses) > 1 and statuses <= {*APPLYING, Status.CONTAINED}:
        return Applied(Status.CONFLICT, "partly contained: " + joined), dict(texts)
    detail = joined if len(checks) > 1 else worst.detail
    return Applied(worst.status, detail, evidence=worst.evidence), dict(texts)


def conflicts_in(path: str, merged: str, context: int = CONTEXT_LINES) -> list[Conflict]:
    """Return each ``<<<<<<<`` .. ``>>>>>>>`` region of a merged text, with context lines."""
    text_lines = merged.splitlines(keepends=True)
    found = []
    start = None
    for index, line in enumerate(text_lines):
        if line.startswith(MARKER):
            start = index
        elif line.startswith(">>>>>>> ") and start is not None:
            first, last = max(start - context, 0), min(index + 1 + context, len(text_lines))
            found.append(Conflict(path, start + 1, "".join(text_lines[first:last])))
            start = None
    return found


def try_patch(
    patch: Patch,
    texts: Mapping[str, str],
    names: Collection[str],
    step: Step | None,
    labels: tuple[str, str, str],
) -> tuple[Applied, Texts]:
    """Try one patch: the strict applier, then (where it conflicts) git's 3-way merge of each
    file (base: before it on its line; theirs: after it); a conflict's texts hold the markers."""
    found, after = check_patch(patch, texts, names)
    if found.status is not Status.CONFLICT or step is None:
        return found, after
    if any(p not in texts or p not in step.before for p in patch.targets):
        return found, after
    merged, why = dict(texts), found.detail
    conflicts: list[Conflict] = []
    for path in patch.targets:
        data, count = merge_file(
            encode(texts[path]), encode(step.before[path]), encode(step.after[path]), labels
        )
        merged[path] = decode(data)
        if count:
            conflicts += conflicts_in(path, merged[path])
    if conflicts:
        return Applied(Status.CONFLICT, why, conflicts=tuple(conflicts)), merged
    if all(merged[p] == texts[p] for p in patch.targets):
        evidence = (Evidence("merge adds nothing", detail=why),)
        return Applied(Status.CONTAINED, why, evidence=evidence), merged
    return Applied(Status.MERGED, why), merged


def land(
    patch: Patch, texts: Mapping[str, str], origin: Mapping[str, str]
) -> tuple[Applied, Texts]:
    """Put one patch on a base: the strict applier, else git's 3-way merge from ``origin``
    (the release's files it was made on), else the strict applier with ``FUZZ``; the caller
    diffs the result against the base anew, so what is sent has full context."""
    before = {p: origin[p] for p in patch.targets if p in origin}
    step = None
    if len(before) == len(patch.targets):
        step = Step(before, apply_patch(patch, before, allow_offset=True))
    found, landed = try_patch(patch, texts, texts.keys(), step, _LABELS)
    if found.status is not Status.CONFLICT:
        return found, landed
    try:
        fuzzed = apply_patch(patch, texts, allow_offset=True, fuzz=FUZZ)
    except HunkMismatchError:
        return found, landed
    return Applied(Status.MERGED, f"applied with fuzz ({found.detail})"), fuzzed


FUZZ = 2  # context lines a hunk may drop at each end where it lands on main (patch's default)
_LABELS = ("base", "release", "patch")


def line_steps(patches: Sequence[Patch], base: Mapping[str, str]) -> list[Step]:
    """Return each patch's files before and after it on its own line's base, in order."""
    steps = []
    texts = dict(base)
    for patch in patches:
        after = apply_patch(patch, texts, allow_offset=True)
        steps.append(Step(texts, after))
        texts = after
    return steps


def replay(
    patches: Sequence[Patch],
    texts: Mapping[str, str],
    names: Collection[str],
    *,
    steps: Sequence[Step] = (),
    ports: Mapping[int, tuple[str, Patch]] | None = None,
    base: str = "base",
    commit: str = "",
    line: str = "line",
    keep: Callable[[OnBase], bool] = lambda _: True,
    taken: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Carry]:
    """Replay ``patches`` in order onto ``texts``, each carried result the next one's base.

    ``steps``: the patches on their own line's base (3-way merges); ``ports``: fix number ->
    (newer line, its patch); ``keep``: whether a carried patch stays for the next ones;
    ``taken``: patch name -> its files as resolved elsewhere, carried instead."""
    found = []
    current, held = dict(texts), taken or {}
    for index, patch in enumerate(patches):
        step = steps[index] if steps else None
        labels = (base, f"{line} before {patch.name}", patch.name)
        own, after = try_patch(patch, current, names, step, labels)
        replayed = OnBase(patch.name, own, base=base, commit=commit)
        carrier = patch if own.status in CARRIED else None
        port = (ports or {}).get(patch.number)
        if port is not None:
            tried, port_after = check_patch(port[1], current, names)
            replayed = replace(replayed, port_version=port[0], port=tried)
            if tried.status in APPLYING:
                carrier, after = port[1], port_after
        if patch.name in held:
            carrier, after = patch, {**current, **held[patch.name]}
        found.append(Carry(replayed, carrier, after))
        if carrier is not None and keep(replayed):
            current = after
    return found


def ports_of(series: Series) -> dict[str, dict[int, Patch]]:
    """Return the ports of the series' patches: each newer line's patches of the same numbers."""
    wanted = series.numbers
    here = series.directory.resolve()
    found: dict[str, dict[int, Patch]] = {}
    for line in lines.all_lines(series.directory.parent):
        if line.directory.resolve() == here or line.version <= series.pins.version:
            continue
        patches = load_series(line.directory).patches
        own = {p.number: p for p in patches if p.number in wanted}
        if own:
            found[line.name] = own
    return found


def ports_for(ports: Ports, version: str | None) -> dict[int, tuple[str, Patch]]:
    """Return fix number -> (line, port): the newest port for ``version`` or older (None:
    upstream main, the newest of each)."""
    chosen: dict[int, tuple[str, Patch]] = {}
    for line in sorted(ports, key=Version):
        if version is None or Version(line) <= Version(version):
            chosen |= {n: (line, patch) for n, patch in ports[line].items()}
    return chosen
