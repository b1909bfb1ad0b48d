"""The canary's verdict: what to do with a patch, and why, given what it found on main."""

from __future__ import annotations

from packaging.version import Version

from overlay.upstream.canary.canary_report import MERGED, BisectResult, Forwarded, ForwardState
from overlay.upstream.results import BROKEN, Action, OnBase, Outcome, Status


def next_step(
    line: str, on_main: OnBase, found: Forwarded, bisect: BisectResult | None
) -> tuple[Action, str]:
    """Return what to do with a patch, and why, given everything the canary found on main
    (its text there, its behaviour when measured, its ``Forwarded:`` target, the bisect)."""
    behaviour = on_main.behaviour
    needed = behaviour is not None and behaviour.outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    port = on_main.port if on_main.port is not None and on_main.port.status not in BROKEN else None
    fixed = Outcome.FAILS_BEFORE_PASSES_AFTER.value
    if found.state in MERGED and needed and port is not None:
        return Action.KEEP, (
            f"keep the port {on_main.port_version}: main still fails without it ({fixed});"
            f" the line's own patch is upstream in {found.commit[:12]}"
            f" ({found.release or 'not yet in a release'})"
        )
    if found.state in MERGED:
        how = "as sent" if found.state is ForwardState.MERGED_AS_SENT else "modified"
        where = f"merged upstream in {found.commit[:12]} ({how})"
        if not found.release:
            return Action.KEEP, f"keep until a release carries it: {where}, not yet in a release"
        if Version(found.release.removeprefix("v")) > Version(line):
            return Action.KEEP, f"keep on {line}; drop on lines from {found.release} on: {where}"
        return Action.DROP, f"drop: {where}, first released in {found.release}"
    by = f" ({bisect.kind}: {bisect.commit[:12]})" if bisect else ""
    if on_main.own.status is Status.CONTAINED:
        return Action.DROP, f"drop: already upstream{by}; record it in Applied-Upstream"
    if behaviour is not None and behaviour.outcome is Outcome.FIXED_ON_STOCK:
        text = f"possibly fixed upstream{by}: its trigger passes on stock main; verify, then drop"
        return Action.KEEP, text
    if on_main.own.status in BROKEN:
        if port is not None:
            how = f"{on_main.port_version} carries it to main ({port.status.value})"
            return Action.KEEP, f"keep: the port {how}"
        by = f", broken by {bisect.commit[:12]}" if bisect else ""
        return Action.CONFLICT, (
            f"port: resolve the conflict{by} (`executorch-arm-overlay edit`, or retarget the"
            " line: a newer line's patch of the same number is its port)"
        )
    if found.applied_upstream:
        return Action.KEEP, (
            f"drop? Applied-Upstream says '{found.applied_upstream}', yet it still"
            f" {on_main.own.status.value} on main: confirm with its trigger cases"
        )
    if found.state is ForwardState.OPEN:
        return Action.KEEP, f"keep; upstream review pending ({found.raw})"
    if found.state is ForwardState.NOT_FORWARDED:
        return Action.KEEP, "keep; forward it upstream (`nox -s upstream`)"
    if found.state is ForwardState.NOT_FOUND:
        return Action.KEEP, f"keep; check where it was forwarded ({found.raw}) by hand"
    return Action.KEEP, "keep"
