"""Refuse to patch an environment that lacks what the patched executorch needs.

An in-place `apply` makes the dist-info declare the line's runtime pins as Requires-Dist
(``torch==2.11.*``, ``tosa-tools==2026.2.*; extra == "arm"``, ...), as the patched wheel
does. Before writing, :func:`check` requires the environment to satisfy them: every plain
requirement and those of :data:`REQUIRED_EXTRAS`. Only an interpreter's site-packages is
checked; an unpacked wheel has no environment to check (the result says it was skipped).

Example: a venv holding executorch 1.2.0 and torch 2.11.0, without tosa-tools.
Becomes: a TargetError naming ``tosa-tools==2026.2.* (executorch[arm])`` as missing and the
command that installs it; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from overlay.envs.venvs import installed_versions
from overlay.errors import TargetError
from overlay.target.locate import Target
from overlay.text.series import Series

# The Arm backend's own extra: what lowering to TOSA needs. The others (vgf, ethos-u) run
# or compile for one kind of target and are optional.
REQUIRED_EXTRAS = ("arm",)


@dataclass(frozen=True)
class DepsCheck:
    """What the dependency check did."""

    checked: tuple[str, ...]  # the requirements the environment satisfies
    skipped: str | None = None  # why nothing was checked


def required(series: Series) -> tuple[Requirement, ...]:
    """Return the requirements a patched tree of this line declares and needs."""
    out = []
    for text in series.pins.wheel_requirements():
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": e}) for e in REQUIRED_EXTRAS):
            out.append(requirement)
    return tuple(out)


def _spelled(requirement: Requirement) -> str:
    marker, text = requirement.marker, f"{requirement.name}{requirement.specifier}"
    extra = next((e for e in REQUIRED_EXTRAS if marker and marker.evaluate({"extra": e})), None)
    return f"{text} (executorch[{extra}])" if extra else text


def check(series: Series, target: Target) -> DepsCheck:
    """Refuse an environment missing a requirement of the patched tree (reads only)."""
    if not target.is_environment:
        return DepsCheck((), f"{target.root} is not an environment's site-packages")
    installed = installed_versions(target.root)
    wanted, found, ok = [], [], []
    for requirement in required(series):
        have = installed.get(canonicalize_name(requirement.name))
        # "2.11.0 + 2.15.0": two copies of one distribution, which satisfies nothing
        if have and " + " not in have and requirement.specifier.contains(have, prereleases=True):
            ok.append(str(requirement))
            continue
        wanted.append(_spelled(requirement))
        found.append(f"{requirement.name} {have or 'missing'}")
    if wanted:
        specs = " ".join(f"'{w.split(' ', 1)[0]}'" for w in wanted)
        venv = target.root.parents[2] if len(target.root.parents) > 2 else target.root
        python = venv / "bin" / "python"
        where = f"--python {python} " if python.is_file() else ""
        raise TargetError(
            f"the environment at {target.root} lacks what the patched executorch needs;"
            " nothing was written",
            expected=", ".join(wanted),
            found=", ".join(found),
            hint=f"install them (`uv pip install {where}{specs}`), or pass --no-deps-check"
            " to patch anyway",
        )
    return DepsCheck(tuple(ok))
