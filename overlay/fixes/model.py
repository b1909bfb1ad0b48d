"""What a fix module fills in: the fix, its claims, runtime forms, divergences, upstream notes,
and the corpus cases and probes it brings to show its bug.

Pure data, no torch, no I/O (builders and probes import torch when a worker calls them).
Every per-release mapping is keyed by a release name such as
``"1.2.0"``: a release line (``patches/1.2.0/``) for runtime forms and divergences, the
release a claim was measured on for triggers. Which lines carry a fix is not here: it is
each line's ``series`` (:mod:`overlay.fixes` reads it).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from overlay.equivalence.protocol import CaseInfo, ItemId, ItemResult

# (module, original function) -> the replacement attribute (a function or staticmethod).
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
    when ``attribute`` is a module-level function.
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
class UpstreamNote:
    """Where a fix's regression test belongs upstream and how to reproduce the bug."""

    test_file: str
    reproducer: str
    narrowing: str = ""  # how the upstream version differs from the overlay's patch
    affected_tests: tuple[str, ...] = ()  # upstream test files to run with the fix


class DivergenceKind(enum.StrEnum):
    """Why (b) stock + a runtime patch and (c) the diff-patched build may differ on an item."""

    # the same fix written differently: (b) fails exactly as declared, (c) lowers
    EQUIVALENT = "equivalent"
    # the diffs carry a fix the runtime patch lacks: (c) right on every target, (b) not
    IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class DeclaredDivergence:
    """A known, accepted (b)/(c) difference: where, the exact observation, and why."""

    id: str
    item: ItemId
    b_error_type: str  # EQUIVALENT: the error (b) raises ("" for an improvement)
    b_error_contains: str
    reason: str
    kind: DivergenceKind = DivergenceKind.EQUIVALENT
    fix: int | None = None  # an IMPROVEMENT: the fix the runtime patch lacks

    def matches(self, item: ItemId, b: ItemResult, c: ItemResult, *, improves: bool) -> bool:
        """Return True when this item's (b)/(c) difference is the one declared.

        ``improves``: (c) is right on every target and (b) is not (an IMPROVEMENT holds
        exactly then); an EQUIVALENT divergence holds when (b) fails as declared and (c)
        lowers.
        """
        if item != self.item:
            return False
        if self.kind is DivergenceKind.IMPROVEMENT:
            return improves
        return (
            not b.ok
            and b.error is not None
            and b.error.type == self.b_error_type
            and self.b_error_contains in b.error.message
            and c.ok
        )


def improvements(
    fix: int, name: str, items: tuple[ItemId, ...], reason: str
) -> tuple[DeclaredDivergence, ...]:
    """Declare the diffs right on ``items`` where a runtime patch without fix ``fix`` is not.

    Example: the seed monkey-patch as path (b) on 1.2.0 lacks fix 5, so the a16w8 tanh of
    ``zoo_grid_warp_a16w8_int16`` is wrong on (b) and right on (c).
    Becomes: one IMPROVEMENT per item, ``<name>:<item name>``, shown with ``reason``.
    """
    return tuple(
        DeclaredDivergence(
            f"{name}:{item.name}", item, "", "", reason, DivergenceKind.IMPROVEMENT, fix
        )
        for item in items
    )


@dataclass(frozen=True, eq=False)
class Fix:
    """One fix, as its module declares it (compared by identity: one object per fix)."""

    number: int
    patch: str  # its patch file's name, e.g. 0001-keep-terminal-int16-quantize.patch
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
    divergences: Mapping[str, tuple[DeclaredDivergence, ...]] = dataclasses.field(
        default_factory=dict, repr=False
    )  # line -> (b)/(c) differences accepted there
    cases: tuple[Case, ...] = dataclasses.field(default=(), repr=False)  # its own cases
    probes: tuple[Probe, ...] = dataclasses.field(default=(), repr=False)

    @property
    def stem(self) -> str:
        """Return the patch name without ``.patch``."""
        return self.patch.removesuffix(".patch")

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

    def releases(self) -> set[str]:
        """Return every release key the module uses (claims, runtime forms, divergences)."""
        return {*self.claims, *self.runtime, *self.divergences}
