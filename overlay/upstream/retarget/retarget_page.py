"""A retarget laid out as blocks: the verdict per patch with its evidence, pins, moves, time."""

from __future__ import annotations

from overlay.render import Block, Heading, Item, Items, Para, Table, item
from overlay.text.series import PATCH_SUFFIX
from overlay.upstream.retarget.retarget_verdict import Retarget, conflict_text


def _patch_items(result: Retarget) -> list[Item]:
    out = []
    for verdict in result.patches:
        out.append(item(f"{verdict.patch}: {verdict.text}"))
        own = verdict.on.own
        if own.conflicts:
            out.append(item(f"its own patch: {conflict_text(own)}", depth=1))
        for before in verdict.bases[:-1]:  # on the pinned release, where measured
            if before.behaviour is not None:
                out.append(item(f"on {before.base}: {before.behaviour.text}", depth=1))
        found = verdict.on.behaviour
        if found is not None:
            for case in found.cases:
                patched = f", patched {case.patched.value}" if case.patched else ""
                error = f" [{case.stock_error}]" if case.stock_error else ""
                out.append(item(f"{case.case}: stock {case.stock.value}{patched}{error}", depth=1))
            if found.test is not None:
                out.append(item(f"upstream test: {found.test.text}", depth=1))
                if found.test_verdict is not None:
                    out.append(item(found.test_verdict.text, depth=2))
                out.append(item(found.test.command, depth=2))
        out += [item(f"FLAG: {flag}", depth=1) for flag in verdict.flags]
    return out


def retarget_blocks(result: Retarget) -> list[Block]:
    """Lay out a retarget: the verdict per patch with its evidence, pins, moves, time."""
    ready = "ready to promote" if result.ready else "NOT ready"
    move = f"{result.old_version} -> {result.version}"
    corpus = "fast" if result.fast else "full"
    rows = tuple(
        (
            v.patch.removesuffix(PATCH_SUFFIX),
            v.on.short,
            v.action.value,
            v.on.behaviour.outcome.value if v.on.behaviour else "not checked",
        )
        for v in result.patches
    )
    attempts = []
    for a in result.attempts:
        pins = ", ".join(f"{k} {v}" for k, v in a.runtime.items())
        attempts.append(item(f"tried {pins}: {'ok' if a.ok else a.detail[:200]}"))
        attempts += [item(f"from: {a.origin}", depth=1)] if a.origin else []
    published = [w for w in result.wheels if w.sha256]
    out: list[Block] = [
        Heading(f"retarget executorch {move}: {ready} ({corpus} corpus)"),
        Para(f"candidate: {result.candidate}"),
        *(
            [Items(tuple(item(f"problem: {p}") for p in result.problems))]
            if result.problems
            else []
        ),
        Table(("patch", "text", "verdict", "behaviour"), rows),
        Items(tuple(_patch_items(result))),
        Heading("Runtime pins", 2),
        Para(", ".join(f"{k} {v}" for k, v in result.runtime.items())),
        Items(tuple(attempts)) if attempts else Para("(not checked)"),
        Heading(f"Wheels: {len(published)} of {len(result.wheels)} published", 2),
        Items(tuple(item(f"{w.file} {w.sha256 or 'not published'}") for w in result.wheels)),
    ]
    if result.locks:
        out += [Heading("Locks", 2), Items(tuple(item(path) for path in result.locks))]
    out += [Heading("Runtime form", 2), Items(tuple(map(item, result.runtime_form.splitlines())))]
    if result.moves:
        moves = tuple(
            (m.case, m.old_patched, m.new_patched, m.attribution, m.note) for m in result.moves
        )
        out += [
            Heading(f"What changes for a user moving to {result.version} (patched builds)", 2),
            Table(("case", result.old_version, result.version, "why", "note"), moves),
        ]
    out += [
        Heading("Time", 2),
        Items(tuple(item(f"{k}: {v:.1f} s") for k, v in result.timings.items())),
    ]
    if result.resume:
        out.append(Para(f"resume: {result.resume}"))
    return out
