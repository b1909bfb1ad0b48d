"""Runtime pin candidates for a new release, best first, from what the release requires (its
torch first, the line's own last); :func:`overlay.upstream.pin_check.confirm_runtime` checks
each in a fresh stock env."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from overlay.lines.pins import Pins
from overlay.upstream.pin_check import PinCandidate
from overlay.upstream.upstream_pins import UpstreamPins


def _release_of(text: str) -> str:
    """Return ``X.Y.Z`` of a version or ``X.Y.*`` spec: ``2.13.0a0`` gives ``2.13.0``."""
    release = Version(text.removesuffix(".*")).release
    return ".".join(str(n) for n in (*release, 0, 0)[:3])


def required_torch(requirements: Sequence[Requirement]) -> str:
    """Return the torch a release's Requires-Dist asks for ("" when it names none).

    Example: ``torch>=2.13.0a0`` gives ``2.13.0``; ``torch==2.11.*`` gives ``2.11.0``.
    """
    for requirement in requirements:
        if requirement.name.lower() != "torch" or requirement.marker is not None:
            continue
        for spec in requirement.specifier:
            if spec.operator in (">=", "==", "~=", "==="):
                with contextlib.suppress(InvalidVersion):
                    return _release_of(spec.version)
    return ""


def torch_candidates(
    version: str,
    *,
    given: Sequence[str],
    requirements: Sequence[Requirement],
    clone_pin: str,
    shared: UpstreamPins,
) -> dict[str, str]:
    """Return torch versions to try for ``version``, best first, with where each came from.

    The line's own torch is not among them: :func:`runtime_candidates` tries it last.
    """
    found: dict[str, str] = {}
    for torch, origin in (
        *((t, "--torch") for t in given),
        (required_torch(requirements), f"executorch {version}'s Requires-Dist"),
        (clone_pin, "upstream's torch_pin.py"),
        (shared.torch.get(version, ""), f"[torch] in {shared.source.name}"),
    ):
        if torch and torch not in found:
            found[torch] = origin
    return found


def runtime_candidates(
    old: Pins,
    requirements: Sequence[Requirement],
    torch_versions: Sequence[str],
    origins: Mapping[str, str] | None = None,
) -> list[PinCandidate]:
    """Return runtime pin sets to try, best first (pure), as docs/upstream.md (runtime pins)
    describes: each torch the release allows, then the pinned one; with each, the ``vgf`` extra's
    tools, each of them back at its pin, then all pinned (the tools that run VGF files stay)."""
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
            and name != "torch"
            and requirement.marker is None
            and not requirement.specifier.contains(base[name], prereleases=True)
        ):
            base[name] = _lower_bound(requirement) or base[name]
    pinned = old.runtime.get("torch", "")
    named = dict(origins or {})
    allowed = [r.specifier for r in requirements if r.name.lower() == "torch" and not r.marker]
    torches = [
        t
        for t in dict.fromkeys([*torch_versions, pinned])
        if t and all(spec.contains(t, prereleases=True) for spec in allowed)
    ]
    wanted = {k: v for k, v in extra.items() if k in base and v}
    # The extra's tools first, then each one back at its pinned version, then all pinned.
    tools = [wanted, *({k: v for k, v in wanted.items() if k != key} for key in wanted), {}]
    out: list[PinCandidate] = []
    for torch in torches:
        where = named.get(torch) or ("upstream pin" if torch in torch_versions else "as pinned")
        for number, tool in enumerate(tools):
            runtime = {**base, "torch": torch, **tool}
            if any(c.runtime == runtime for c in out):
                continue
            origin = f"torch {torch} ({where})"
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
