"""The fix registry: one module per fix, ``overlay/fixes/fNNNN_<slug>.py`` (docs/fixes.md)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

from overlay.errors import OverlayError
from overlay.fixes.model import (
    WRONG_NUMBERS,
    DiffOnly,
    Direction,
    Divergence,
    Effect,
    ErrorSignature,
    Fix,
    RuntimeForm,
    Trigger,
    UpstreamNote,
    public_release,
    release_matches,
)
from overlay.lines import Line
from overlay.lines.listing import patch_number, read_series_names

__all__ = [  # the model names re-exported: overlay.fixes.Fix
    "WRONG_NUMBERS",
    "DiffOnly",
    "Direction",
    "Divergence",
    "Effect",
    "ErrorSignature",
    "Fix",
    "RuntimeForm",
    "Trigger",
    "UpstreamNote",
    "release_matches",
]

MODULE_NAME = re.compile(r"^f(\d{4})_[a-z0-9_]+$")


def _module_error(message: str, *, expected: str, found: str) -> OverlayError:
    return OverlayError(
        message,
        expected=expected,
        found=found,
        hint="name the module f<NNNN>_<slug>.py after its fix number and define FIX in it"
        " (see docs/fixes.md)",
    )


@dataclass(frozen=True)
class Registry:
    """Every fix, ascending by number."""

    fixes: tuple[Fix, ...]

    def by_number(self, number: int) -> Fix:
        """Return fix ``number``."""
        fix = next((fix for fix in self.fixes if fix.number == number), None)
        if fix is not None:
            return fix
        raise OverlayError(
            f"there is no fix {number}",
            expected=", ".join(str(f.number) for f in self.fixes),
            found=str(number),
            hint="pick fix numbers from `overlay.fixes.FIXES`",
        )

    def by_patch(self, name: str) -> Fix | None:
        """Return the fix patch file ``name`` carries (its number; ``.patch`` optional), if any."""
        number = patch_number(name.removesuffix(".patch") + ".patch")
        return next((fix for fix in self.fixes if fix.number == number), None)

    def triggers_of(self, case: str, version: str | None = None) -> list[tuple[Fix, Trigger]]:
        """Return every (fix, trigger) that names corpus case ``case`` (claimed for ``version``)."""
        return [
            (fix, t)
            for fix in self.fixes
            for t in fix.triggers
            if t.case == case and t.applies_to(version)
        ]

    def divergences(self, version: str | None = None) -> tuple[Divergence, ...]:
        """Return the divergence rules declared for the line of ``version`` (None: every line),
        each naming its fix."""
        release = None if version is None else public_release(version)
        return tuple(
            dataclasses.replace(rule, fix=fix.number)
            for fix in self.fixes
            for line, rules in fix.divergences.items()
            if version is None or public_release(line) == release
            for rule in rules
        )

    def _carried(self, line: Line) -> tuple[list[Fix], list[str]]:
        """Return the fixes ``line``'s series names, and one problem per unknown patch."""
        known = {fix.number: fix for fix in self.fixes}
        carried, problems = [], []
        for name in read_series_names(line.directory):
            fix = known.get(patch_number(name) or 0)
            if fix is None:
                problems.append(
                    f"line {line.name} lists {name}, which has no fix module"
                    f" (overlay/fixes/f{name[:4]}_<slug>.py)"
                )
            else:
                carried.append(fix)
        return carried, problems

    def carried_by(self, line: Line) -> tuple[Fix, ...]:
        """Return the fixes ``line`` carries, in series order (a patch with no fix: error)."""
        carried, problems = self._carried(line)
        if problems:
            raise OverlayError(
                f"line {line.name} carries a patch the fix registry does not know",
                expected="a fix module for every patch of the series",
                found="; ".join(problems),
                hint="add overlay/fixes/fNNNN_<slug>.py for it (see docs/fixes.md)",
            )
        return tuple(carried)

    def problems(self, lines: Sequence[Line]) -> list[str]:
        """Return every way the registry and ``lines`` disagree ([]: consistent)."""
        found: list[str] = []
        names = {line.name for line in lines}
        carriers: dict[int, set[str]] = {}
        for line in lines:
            carried, unknown = self._carried(line)
            found += unknown
            for fix in carried:
                carriers.setdefault(fix.number, set()).add(line.name)
                if line.name not in fix.runtime:
                    found.append(
                        f"fix {fix.number} is carried by line {line.name} but has no runtime"
                        f" form for it and no DiffOnly reason"
                    )
        ids: dict[str, int] = {}
        for fix in self.fixes:
            found += _fix_problems(fix, names, carriers.get(fix.number, set()))
            for divergence in (d for ds in fix.divergences.values() for d in ds):
                if divergence.name in ids:
                    found.append(
                        f"divergence {divergence.name!r} is declared by fixes"
                        f" {ids[divergence.name]} and {fix.number}"
                    )
                ids[divergence.name] = fix.number
        return found


def _fix_problems(fix: Fix, lines: set[str], carriers: set[str]) -> list[str]:
    """Return the problems of one fix module: its release keys and runtime forms."""
    found = []
    for release in sorted({*fix.claims, *fix.runtime, *fix.divergences}):
        if public_release(release) != release:
            found.append(f"fix {fix.number}: {release!r} is not a release such as 1.2.0")
    for release in sorted({*fix.runtime, *fix.divergences}):
        if release not in lines and release not in fix.claims:
            found.append(
                f"fix {fix.number}: {release} names neither a line nor a release with claims"
            )
        elif release in lines and release not in carriers:
            found.append(
                f"fix {fix.number}: has a runtime form or divergences for line {release},"
                " whose series does not carry it"
            )
    for release, declared in sorted(fix.runtime.items()):
        if isinstance(declared, DiffOnly) and not declared.reason.strip():
            found.append(f"fix {fix.number}: DiffOnly on {release} gives no reason")
        for form in (f for f in fix.runtime_forms(release) if f.repo_path not in fix.repo_paths):
            found.append(
                f"fix {fix.number}: the {release} runtime form replaces a function in"
                f" {form.repo_path}, which is not in its repo_paths"
            )
    return found


def from_modules(modules: Iterable[ModuleType]) -> Registry:
    """Build a registry from fix modules (each ``fNNNN_<slug>`` defining ``FIX``)."""
    by_number: dict[int, Fix] = {}
    for module in modules:
        name = module.__name__.rpartition(".")[2]
        match = MODULE_NAME.match(name)
        if match is None:
            raise _module_error(
                f"{module.__name__} is not named like a fix module",
                expected="f<NNNN>_<slug> (four digits, lower case)",
                found=name,
            )
        fix = getattr(module, "FIX", None)
        if not isinstance(fix, Fix):
            raise _module_error(
                f"{module.__name__} defines no FIX",
                expected="FIX = Fix(...) at the top of the module",
                found=type(fix).__name__,
            )
        if fix.number != int(match.group(1)):
            raise _module_error(
                f"{module.__name__} declares fix {fix.number}",
                expected=f"fix {int(match.group(1))}, the module's number",
                found=f"number={fix.number}",
            )
        if fix.number in by_number:
            raise _module_error(
                f"two modules declare fix {fix.number}",
                expected="one module per fix number",
                found=f"{module.__name__} and another module of fix {fix.number}",
            )
        by_number[fix.number] = fix
    return Registry(tuple(by_number[n] for n in sorted(by_number)))


def fix_modules(package: str = __name__) -> list[ModuleType]:
    """Import and return the fix modules of ``package``, by name (``f`` + digit: a fix module)."""
    folder = importlib.import_module(package)
    names = sorted(info.name for info in pkgutil.iter_modules(folder.__path__))
    return [
        importlib.import_module(f"{package}.{name}") for name in names if re.match(r"f\d", name)
    ]


def discover(package: str = __name__) -> Registry:
    """Build the registry of every fix module in ``package`` (default: this package)."""
    return from_modules(fix_modules(package))


REGISTRY = discover()
FIXES: tuple[Fix, ...] = REGISTRY.fixes
# the registry's look-ups, as the package's own: fixes.by_number(7)
by_number = REGISTRY.by_number
by_patch = REGISTRY.by_patch
triggers_of = REGISTRY.triggers_of
divergences = REGISTRY.divergences
carried_by = REGISTRY.carried_by
