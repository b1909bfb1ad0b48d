"""The status page's rows: per line and patch, the finding and what to do next (pure).

Example: patch 0003 conflicts on main, its ``Forwarded:`` issue was fixed by a main commit
first released in v1.3.0, and the previous page had it applying.
Becomes: ``Row(main=CONFLICT, upstream="merged modified in 22867a914826 (v1.3.0)",
next_step="drop: merged upstream in 22867a914826 (modified), first released in v1.3.0",
newly_conflicting=False)``: a patch upstream carries is not a new conflict to fail on.
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from overlay.upstream.canary.results import (
    BisectResult,
    Forwarded,
    ForwardState,
    PatchBehaviour,
    PatchOnTarget,
    Row,
    TextStatus,
)

MERGED = frozenset({ForwardState.MERGED_AS_SENT, ForwardState.MERGED_MODIFIED})
BROKEN = frozenset({TextStatus.CONFLICT, TextStatus.MISSING})
FINE = frozenset({TextStatus.UNCHANGED, TextStatus.OFFSET, TextStatus.MERGED, TextStatus.UPSTREAM})
FIXED_ON_STOCK = "already fixed on stock"
FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"


def upstream_text(found: Forwarded) -> str:
    """Return the Upstream column: the forwarded state, the commit and its first release."""
    if found.state in MERGED:
        release = found.release or "not yet in a release"
        return f"{found.state.value} in {found.commit[:12]} ({release}; by {found.matched_by})"
    if found.state is ForwardState.OPEN and found.number is not None:
        return f"{found.state.value}: {found.kind} #{found.number}"
    return found.state.value


def result_text(on_main: PatchOnTarget, port: PatchOnTarget | None) -> str:
    """Return one sentence of what the canary found on main."""
    status = on_main.status
    if status is TextStatus.OFFSET:
        text = "applies at offset " + ",".join(f"{o:+d}" for o in on_main.offsets)
    elif status is TextStatus.CONFLICT:
        paths = sorted({h.path for h in on_main.conflicts})
        where = f" in {', '.join(paths)}" if paths else ""
        text = f"conflicts{where} ({len(on_main.conflicts)} hunks)"
    elif status is TextStatus.UPSTREAM:
        how = ", ".join(dict.fromkeys(e.kind for e in on_main.evidence)) or "text"
        text = f"already upstream ({how})"
    elif status is TextStatus.MISSING:
        text = f"file missing: {on_main.detail}"
    else:
        text = status.value
    if port is not None:
        text += f"; port {port.port}: {port.status.value}"
    return text


def next_step(  # noqa: PLR0917 - every finding of the canary decides
    line: str,
    on_main: PatchOnTarget,
    found: Forwarded,
    port: PatchOnTarget | None,
    behaviour: PatchBehaviour | None,
    bisect: BisectResult | None,
) -> str:
    """Return what to do with the patch, given everything the canary found."""
    needed = behaviour is not None and behaviour.outcome == FAILS_BEFORE_PASSES_AFTER
    if found.state in MERGED and needed and port is not None and port.status in FINE:
        return (
            f"keep the port {port.port}: main still fails without it ({FAILS_BEFORE_PASSES_AFTER});"
            f" the line's own patch is upstream in {found.commit[:12]}"
            f" ({found.release or 'not yet in a release'})"
        )
    if found.state in MERGED:
        how = "as sent" if found.state is ForwardState.MERGED_AS_SENT else "modified"
        where = f"merged upstream in {found.commit[:12]} ({how})"
        if not found.release:
            return f"keep until a release carries it: {where}, not yet in a release"
        if Version(found.release.removeprefix("v")) > Version(line):
            return f"keep on {line}; drop on lines from {found.release} on: {where}"
        return f"drop: {where}, first released in {found.release}"
    if on_main.status is TextStatus.UPSTREAM:
        by = f" ({bisect.kind}: {bisect.commit[:12]})" if bisect else ""
        return f"drop: already upstream{by}; record it in Applied-Upstream"
    if behaviour is not None and behaviour.outcome == FIXED_ON_STOCK:
        by = f" ({bisect.kind}: {bisect.commit[:12]})" if bisect else ""
        return f"possibly fixed upstream{by}: its trigger passes on stock main; verify, then drop"
    if on_main.status in BROKEN:
        if port is not None and port.status in FINE:
            return f"keep: the port {port.port} carries it to main ({port.status.value})"
        by = f", broken by {bisect.commit[:12]}" if bisect else ""
        return (
            f"port: resolve the conflict{by} (`executorch-arm-overlay edit`, or a port under"
            " ports/)"
        )
    if found.applied_upstream:
        return (
            f"drop? Applied-Upstream says '{found.applied_upstream}', yet it still"
            f" {on_main.status.value} on main: confirm with its trigger cases"
        )
    if found.state is ForwardState.OPEN:
        return f"keep; upstream review pending ({found.raw})"
    if found.state is ForwardState.NOT_FORWARDED:
        return "keep; forward it upstream (`nox -s upstream`)"
    if found.state is ForwardState.NOT_FOUND:
        return f"keep; check where it was forwarded ({found.raw}) by hand"
    return "keep"


def build_row(
    line: str,
    *,
    subject: str,
    on_main: PatchOnTarget,
    found: Forwarded,
    port: PatchOnTarget | None,
    behaviour: PatchBehaviour | None,
    bisect: BisectResult | None,
    today: str,
    previous: Mapping[tuple[str, str], Row] | None,
) -> Row:
    """Return one page row; ``previous`` (rows of the last page) gives ``since`` and newness."""
    before = (previous or {}).get((line, on_main.patch))
    since = before.since if before is not None and before.main is on_main.status else today
    newly = (
        previous is not None
        and on_main.status in BROKEN
        and found.state not in MERGED
        and (before is None or before.main not in BROKEN)
    )
    result = result_text(on_main, port)
    if behaviour is not None:
        result += f"; behaviour: {behaviour.outcome}"
    return Row(
        line=line,
        patch=on_main.patch,
        subject=subject,
        main=on_main.status,
        upstream=upstream_text(found),
        result=result,
        next_step=next_step(line, on_main, found, port, behaviour, bisect),
        since=since,
        newly_conflicting=newly,
        bisect=f"{bisect.kind}: {bisect.commit}" if bisect else "",
    )
