"""What a fix module fills in (docs/fixes.md has each field): pure data, no torch, no I/O."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from overlay.items import CaseInfo

# (module, original function or a copy of the original dict) -> the replacement
Builder = Callable[[Any, Any], Any]


class Effect(enum.StrEnum):
    """What a fix does to a trigger case, stock vs patched (an a-vs-b verdict)."""

    FIXED = "fixed"
    REGRESSION = "regression"
    CHANGED = "changed"

    def triggers(self, **why: str) -> tuple[Trigger, ...]:
        """Return one claim of this effect per case: ``Effect.FIXED.triggers(case_name="why")``."""
        return tuple(Trigger(case, self, text) for case, text in why.items())


def public_release(version: str) -> str | None:
    """Return the public release of ``version`` (``1.2.0+armfix.a`` -> ``1.2.0``; None: invalid)."""
    try:
        return str(Version(Version(version).public))
    except InvalidVersion:
        return None


def release_matches(releases: str, version: str | None) -> bool:
    """Return True when ``version`` is in the PEP 440 specifier ``releases`` ("" or None: any)."""
    if version is None or not releases:
        return True
    try:
        public = Version(version).public
        return SpecifierSet(releases).contains(public, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


@dataclass(frozen=True)
class Trigger:
    """A corpus case where stock and patched differ as ``effect`` (FIXED: stock fails it).

    ``release``: the release measured on, filled in by ``Fix.triggers`` from the claims' key.
    """

    case: str
    effect: Effect
    why: str
    release: str = ""

    def applies_to(self, version: str | None) -> bool:
        """Return True when the claim is made for executorch ``version`` (None: any)."""
        if version is None or not self.release:
            return True
        return public_release(version) == public_release(self.release)


@dataclass(frozen=True)
class RuntimeForm:
    """The fix as a runtime monkey-patch on one line (``owner`` "": a module-level attribute)."""

    repo_path: str
    owner: str
    attribute: str
    build: Builder

    @property
    def qualname(self) -> str:
        """Return ``Owner.attribute`` (or ``attribute`` for a module-level function)."""
        return f"{self.owner}.{self.attribute}" if self.owner else self.attribute


def runtime_form(repo_path: str, owner: str, attribute: str) -> Callable[[Builder], RuntimeForm]:
    """Declare a builder a runtime form: ``@runtime_form(path, "Owner", "attribute")``."""
    return lambda build: RuntimeForm(repo_path, owner, attribute, build)


@dataclass(frozen=True)
class DiffOnly:
    """A line carries the fix with no runtime form: the diff-patched build is its only form."""

    reason: str

    @property
    def text(self) -> str:
        """Return the declaration as the docs and checks show it."""
        return f"diff only: {self.reason}"


CaseBuild = Callable[[], tuple[Any, tuple[Any, ...]]]  # -> (module, inputs)


@dataclass(frozen=True)
class Case:
    """A corpus case the fix brings; ``build`` runs in a worker and imports torch inside."""

    info: CaseInfo
    build: CaseBuild = dataclasses.field(repr=False)


def case(name: str, spec: str, quantize: str | None, **info: Any) -> Callable[[CaseBuild], Case]:
    """Declare a builder a case of its fix: ``@case("name", "TOSA-1.0+FP", None, fast=True)``."""
    return lambda build: Case(CaseInfo(name, spec, quantize, **info), build)


@dataclass(frozen=True)
class Probe:
    """The function the fix replaces, run on a small FX graph in a worker (torch inside)."""

    name: str
    description: str
    run: Callable[[], Any] = dataclasses.field(repr=False)


@dataclass(frozen=True)
class PullRequest:
    """An upstream pull request a fix cites (the PR text names it and cc's its author)."""

    number: int
    title: str
    author: str  # the GitHub handle, without "@"


@dataclass(frozen=True)
class UpstreamNote:
    """A fix's reproducer upstream and what a maintainer reads."""

    reproducer: str
    narrowing: str = ""
    affected_tests: tuple[str, ...] = ()
    symptom: str = ""  # the title of the issue to file
    regressed_by: tuple[PullRequest, ...] = ()
    related: tuple[PullRequest, ...] = ()
    reviewers: str = ""  # for the PR's reviewers only, never the commit

    @property
    def cited(self) -> tuple[PullRequest, ...]:
        """Return every pull request the fix cites: the regressing ones first."""
        return (*self.regressed_by, *self.related)


class Direction(enum.StrEnum):
    """Which way (b) stock + a runtime patch and (c) the diff-patched build differ, as declared."""

    EQUIVALENT = "equivalent"  # the same fix written differently
    IMPROVEMENT = "improvement"  # the diffs carry a fix (or a form of it) (b) lacks


@dataclass(frozen=True)
class ErrorSignature:
    """An error as a run observes it: the exception type and a part of its message."""

    type: str
    contains: str


WrongNumbers = Literal["wrong numbers"]
WRONG_NUMBERS: WrongNumbers = "wrong numbers"  # (b) lowers, but an executed target is wrong


@dataclass(frozen=True)
class Divergence:
    """A known, accepted (b)/(c) difference: a rule over what a run observes, and why.

    Every condition must hold (docs/equivalence.md, "Declared differences are rules"):
    ``spec_has``/``spec_lacks`` features of the TOSA spec, ``quantize`` ("": any), one of
    ``involves`` named by a lowered graph or (b)'s error, and (b) showing ``other``.
    """

    name: str
    direction: Direction
    other: tuple[ErrorSignature, ...] | WrongNumbers
    reason: str
    spec_has: tuple[str, ...] = ()
    spec_lacks: tuple[str, ...] = ()
    quantize: str = ""
    involves: tuple[str, ...] = ()
    fix: int = 0

    @property
    def condition(self) -> str:
        """Return the rule's condition as one phrase (reports print it with the reason)."""
        parts = [f"+{f}" for f in self.spec_has] + [f"no {f}" for f in self.spec_lacks]
        parts += [self.quantize] if self.quantize else []
        parts += [f"involves {' or '.join(self.involves)}"] if self.involves else []
        other = self.other
        shows = (
            other
            if isinstance(other, str)
            else "raises " + " or ".join(f"{e.type} ({e.contains!r})" for e in other)
        )
        return f"{', '.join(parts) or 'any item'}; (b) {shows}"


@dataclass(frozen=True, eq=False)
class Fix:
    """One fix, as its module declares it (compared by identity; keys: docs/fixes.md)."""

    number: int
    title: str
    repo_paths: tuple[str, ...]  # the files its patches touch
    claims: Mapping[str, tuple[Trigger, ...]] = dataclasses.field(repr=False)
    upstream: UpstreamNote = dataclasses.field(repr=False)
    runtime: Mapping[str, RuntimeForm | tuple[RuntimeForm, ...] | DiffOnly] = dataclasses.field(
        default_factory=dict, repr=False
    )
    divergences: Mapping[str, tuple[Divergence, ...]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    cases: tuple[Case, ...] = dataclasses.field(default=(), repr=False)
    probes: tuple[Probe, ...] = dataclasses.field(default=(), repr=False)

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        """Return every claim, each with the release it was measured on."""
        return tuple(
            dataclasses.replace(trigger, release=release)
            for release, triggers in self.claims.items()
            for trigger in triggers
        )

    def runtime_forms(self, line: str) -> tuple[RuntimeForm, ...]:
        """Return the runtime forms written for ``line`` (none: no entry, or diff only)."""
        form = self.runtime.get(line)
        if isinstance(form, RuntimeForm):
            return (form,)
        return () if form is None or isinstance(form, DiffOnly) else form
