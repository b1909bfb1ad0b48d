"""Compare an environment with the pins its release line was proven with: advice, no refusal
(an in-place `apply` changes executorch's files only; a tool of an extra not installed is no
difference; an unpacked wheel has no environment to compare)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from overlay.envs.venvs import installed_versions
from overlay.text.series import Series
from overlay.tree.locate import Target


@dataclass(frozen=True)
class DepsCheck:
    """What the comparison with the line's pins found."""

    checked: tuple[str, ...]  # the line's pins the environment satisfies
    skipped: str | None = None  # why nothing was compared
    differ: tuple[str, ...] = ()  # "torch missing (line: torch==2.13.*)"
    install: str | None = None  # the command that installs the line's pins there


def check(series: Series, target: Target) -> DepsCheck:
    """Compare the environment of ``target`` with the line's runtime pins (reads only)."""
    if not target.is_environment:
        return DepsCheck((), f"{target.root} is not an environment's site-packages")
    installed = installed_versions(target.root)
    ok, differ, wanted = [], [], []
    for text in series.pins.wheel_requirements():
        requirement = Requirement(text)
        optional, requirement.marker = requirement.marker is not None, None  # an extra's tool
        have = installed.get(canonicalize_name(requirement.name))
        if have is None and optional:
            continue
        # "2.11.0 + 2.15.0": two copies of one distribution, which satisfies nothing
        if have and " + " not in have and requirement.specifier.contains(have, prereleases=True):
            ok.append(str(requirement))
            continue
        differ.append(f"{requirement.name} {have or 'missing'} (line: {requirement})")
        wanted.append(f"'{requirement}'")
    if not differ:
        return DepsCheck(tuple(ok))
    venv = target.root.parents[2] if len(target.root.parents) > 2 else target.root
    python = venv / "bin" / "python"
    where = f"--python {python} " if python.is_file() else ""
    return DepsCheck(tuple(ok), None, tuple(differ), f"uv pip install {where}{' '.join(wanted)}")
