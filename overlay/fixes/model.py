"""What a fix module fills in: the fix, its claims, runtime forms, divergences, upstream notes,
and the corpus cases and probes it brings to show its bug.

Pure data, no torch, no I/O. A per-release mapping is keyed by a release name (``"1.2.0"``):
a release line for runtime forms and divergences, the release a claim was measured on for
triggers. Which lines carry a fix is each line's ``series``, not here.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from overlay.items import CaseInfo

# (module, original function) -> the replacement attribute (a function or staticmethod), or
# (module, a copy of the original dict) -> the dict whose entries replace its entries.
Builder = Callable[[Any, Any], Any]


class Effect(enum.StrEnum):
    """What a fix does to a trigger case, stock vs patched (an a-vs-b verdict)."""

    FIXED = "fixed"
    REGRESSION = "regression"
    CHANGED = "changed"


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
    """A corpus case that shows the fix: stock and patched differ there, as ``effect``.

    A FIXED trigger is a *bug trigger*: stock fails it. ``release`` is the release the
    claim was measured on; a fix module leaves it empty and files the trigger under that
    release in :attr:`Fix.claims` (``Fix.triggers`` fills it in).
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
    """The fix as a runtime monkey-patch on one line: which attribute, and its builder.

    ``owner`` is the class holding ``attribute`` in the module at ``repo_path``, or ""
    when ``attribute`` is a module-level function or dict (a dict is updated in place:
    other modules hold the same object).
    """

    repo_path: str
    owner: str
    attribute: str
    build: Builder

    @property
    def qualname(self) -> str:
        """Return ``Owner.attribute`` (or ``attribute`` for a module-level function)."""
        return f"{self.owner}.{self.attribute}" if self.owner else self.attribute


@dataclass(frozen=True)
class DiffOnly:
    """A line carries the fix with no runtime form: the diff-patched build is its only form."""

    reason: str

    @property
    def text(self) -> str:
        """Return the declaration as the docs and checks show it."""
        return f"diff only: {self.reason}"


@dataclass(frozen=True)
class Case:
    """A corpus case the fix brings to show its bug (a case only its claims name).

    ``build`` runs in a worker under the corpus seed: it imports torch inside and returns
    ``(module, inputs)``, as the corpus builders do.
    """

    info: CaseInfo
    build: Callable[[], tuple[Any, tuple[Any, ...]]] = dataclasses.field(repr=False)


@dataclass(frozen=True)
class Probe:
    """A probe: the function the fix replaces, run directly on a small FX graph.

    ``run`` runs in a worker (it imports torch and executorch inside) and returns a
    JSON-ready observation or an FX graph (compared as its canonical text) across paths.
    """

    name: str
    description: str
    run: Callable[[], Any] = dataclasses.field(repr=False)


@dataclass(frozen=True)
class PullRequest:
    """An upstream pull request a fix cites: its number, title and author's GitHub handle.

    Example: ``PullRequest(21974, "Arm backend: Fuse quantized activations by setting qmin
    to zp", "SaoirseARM")``.
    Becomes: ``#21974 (Arm backend: Fuse ..., @SaoirseARM)`` in the PR text, and
    ``@SaoirseARM`` in its cc line.
    """

    number: int
    title: str
    author: str  # the GitHub handle, without "@"


@dataclass(frozen=True)
class UpstreamNote:
    """Where a fix's regression test belongs upstream, how to reproduce the bug, and the
    words a maintainer reads: the symptom (the issue's title) and the PRs it cites."""

    test_file: str
    reproducer: str
    narrowing: str = ""  # how the upstream version differs from the overlay's patch
    affected_tests: tuple[str, ...] = ()  # upstream test files to run with the fix
    symptom: str = ""  # the bug as a user meets it: the title of the issue to file
    regressed_by: tuple[PullRequest, ...] = ()  # the upstream change that brought the bug
    related: tuple[PullRequest, ...] = ()  # upstream changes a reviewer should know of
    # for the PR's reviewers only, not the commit: what stops being true once they act on it
    reviewers: str = ""

    @property
    def cited(self) -> tuple[PullRequest, ...]:
        """Return every pull request the fix cites: the regressing ones first."""
        return (*self.regressed_by, *self.related)


class Direction(enum.StrEnum):
    """Which way (b) stock + a runtime patch and (c) the diff-patched build differ, as declared."""

    # the same fix written differently: (b) fails with the declared error, (c) lowers
    EQUIVALENT = "equivalent"
    # the diffs carry a fix (or a form of it) the runtime patch lacks: (b) fails with the
    # declared error or has wrong numbers, (c) is neither wrong nor failing on any target
    IMPROVEMENT = "improvement"


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

    It holds on any item, the user's ``--models`` cases included, when every condition
    holds: the case's TOSA spec has each feature of ``spec_has`` and none of
    ``spec_lacks`` (``"INT"``, ``"FP"``, ``"int16"``, as in ``TOSA-1.0+INT+int16``), it is
    quantised as ``quantize`` (``""``: any), one of ``involves`` (an op or pass name) is
    named by a path's lowered graph or by (b)'s error, and (b), the other form, shows
    ``other``: it raises one of those errors on some target, or (``WRONG_NUMBERS``) lowers
    with wrong outputs. ``fix`` is the declaring fix's number (:meth:`Fix.rules` fills it in).

    Example: fix 1 on 1.2.0: IMPROVEMENT, ``spec_has=("INT", "int16")``,
    ``spec_lacks=("FP",)``, ``other=(ErrorSignature("TosaValueError", "doesn't support
    torch.float32"),)``.
    Becomes: any case on TOSA-1.0+INT+int16 where the runtime patch raises that error and
    the diffs lower and are not wrong reads "improved (fix 1: <name>)".
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
    """One fix, as its module declares it (compared by identity: one object per fix)."""

    number: int
    title: str
    repo_paths: tuple[str, ...]  # the files its patches touch
    # release measured on -> trigger cases
    claims: Mapping[str, tuple[Trigger, ...]] = dataclasses.field(repr=False)
    upstream: UpstreamNote = dataclasses.field(repr=False)
    # line -> its runtime form (several when the fix replaces several functions), or why it
    # has none
    runtime: Mapping[str, RuntimeForm | tuple[RuntimeForm, ...] | DiffOnly] = dataclasses.field(
        default_factory=dict, repr=False
    )
    divergences: Mapping[str, tuple[Divergence, ...]] = dataclasses.field(
        default_factory=dict, repr=False
    )  # line -> the (b)/(c) differences accepted there, as rules
    cases: tuple[Case, ...] = dataclasses.field(default=(), repr=False)  # its own cases
    probes: tuple[Probe, ...] = dataclasses.field(default=(), repr=False)

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        """Return every claim, each with the release it was measured on."""
        return tuple(
            dataclasses.replace(trigger, release=release)
            for release, triggers in self.claims.items()
            for trigger in triggers
        )

    def rules(self, line: str) -> tuple[Divergence, ...]:
        """Return the divergences declared for ``line``, each naming this fix."""
        return tuple(
            dataclasses.replace(d, fix=self.number) for d in self.divergences.get(line, ())
        )

    def runtime_forms(self, line: str) -> tuple[RuntimeForm, ...]:
        """Return the runtime forms written for ``line`` (none: no entry, or diff only)."""
        form = self.runtime.get(line)
        if isinstance(form, RuntimeForm):
            return (form,)
        return () if form is None or isinstance(form, DiffOnly) else form

    def releases(self) -> set[str]:
        """Return every release key the module uses (claims, runtime forms, divergences)."""
        return {*self.claims, *self.runtime, *self.divergences}
