"""Apply the runtime forms of the line the installed executorch is on, each fix on its own."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from overlay import fixes, lines
from overlay._hashing import sha256_file
from overlay.errors import OverlayError, RuntimePatchError
from overlay.fixes import DiffOnly, Fix, Registry, RuntimeForm
from overlay.lines import Line
from overlay.lines.pins import load

_GUARD = "_overlay_runtime_fix_{number}_{attribute}_original"


@dataclass(frozen=True)
class RuntimeFix:
    """One fix's runtime form on one line, and the dotted name of the module it patches."""

    fix: Fix
    form: RuntimeForm
    module_name: str

    def resolve_owner(self) -> tuple[Any, Any]:
        """Import the module and return (module, object that holds the attribute)."""
        module = importlib.import_module(self.module_name)
        owner = self.form.owner
        return module, (getattr(module, owner) if owner else module)


def _raw(owner: Any, attribute: str) -> Any:
    """Return the attribute as stored (a staticmethod object stays wrapped)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attribute in vars(klass):
                return vars(klass)[attribute]
    return getattr(owner, attribute)


def _function_of(value: Any) -> Any:
    return value.__func__ if isinstance(value, staticmethod | classmethod) else value


def _snapshot(value: Any) -> Any:
    """Return what restores ``value`` later: a copy of a dict, the value itself otherwise."""
    return dict(value) if isinstance(value, dict) else value


def _put(owner: Any, attribute: str, value: Any) -> None:
    """Set ``owner.attribute``; a dict is updated in place, as other modules hold it too."""
    current = getattr(owner, attribute, None)
    if isinstance(current, dict) and isinstance(value, dict):
        current.clear()
        current.update(value)
    else:
        setattr(owner, attribute, value)


class Runtime:
    """The runtime forms of ``registry``'s fixes, for the lines under ``root``.

    ``root`` None: :func:`overlay.lines.default_root` when asked (``$OVERLAY_PATCHES`` in
    a worker, the checkout's ``patches/``, or the lines shipped in the package).
    """

    def __init__(self, registry: Registry, root: Path | None = None) -> None:
        self.registry = registry
        self.root = root

    def _lines(self) -> tuple[Line, ...]:
        root = self.root or lines.default_root()  # a lines root, or one series folder
        is_line = lines.is_series_folder(root)
        found = (Line(str(load(root).executorch), root),) if is_line else lines.all_lines(root)
        if not found:
            raise RuntimePatchError(
                "no release line to take the runtime forms from",
                expected="patches/<version>/ folders holding a series",
                found=str(root),
                hint="restore patches/ from git, or set $OVERLAY_PATCHES to a line folder",
            )
        return found

    def package_dir(self) -> str:
        """Return the executorch package (and distribution) name, as the newest line pins it."""
        return self._lines()[-1].pins.package_dir

    def line(self) -> Line:
        """Return the line of the installed executorch; refuse a patched build or no line."""
        known = self._lines()
        supported = ", ".join(line.name for line in known)
        package = known[-1].pins.package_dir
        try:
            found = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found = ""
        try:
            version = Version(found)
        except InvalidVersion:
            raise RuntimePatchError(
                f"{package} is not installed in this interpreter",
                expected=f"{package} at one of the supported lines: {supported}",
                found=f"{package} {found or 'not installed'}",
                hint=f"install {package}=={known[-1].name}",
            ) from None
        if version.local is not None:
            raise RuntimePatchError(
                "the runtime patch applies to stock executorch releases only",
                expected=f"{package} at one of the supported lines: {supported}",
                found=f"{package} {found}",
                hint="a patched build (+armfix) already carries the fixes: do not runtime-patch"
                " it; otherwise install the stock release",
            )
        line = next((line for line in known if line.version == version), None)
        if line is not None:
            return line
        raise RuntimePatchError(
            f"{package} {found} has no release line: no runtime forms are written for it",
            expected=f"{package} at one of the supported lines: {supported}",
            found=f"{package} {found}",
            hint=f"install {package} at one of {supported}, or retarget the overlay to {found}"
            f" (`executorch-arm-overlay retarget {found}`)",
        )

    def forms(self, line: Line) -> tuple[RuntimeFix, ...]:
        """Return the runtime forms of the fixes ``line`` carries (diff-only ones left out)."""
        pins = line.pins
        return tuple(
            RuntimeFix(fix, form, pins.module_name(form.repo_path))
            for fix in self.registry.carried_by(line)
            for form in fix.runtime_forms(line.name)
        )

    def _select(self, line: Line, numbers: Iterable[int] | None) -> list[RuntimeFix]:
        available = self.forms(line)
        if numbers is None:
            return list(available)
        selected: list[RuntimeFix] = []
        for number in numbers:
            fix = self.registry.by_number(number)  # an unknown number is an OverlayError
            forms = [f for f in available if f.fix.number == number]
            if not forms:
                declared = fix.runtime.get(line.name)
                why = declared.text if isinstance(declared, DiffOnly) else "not in its series"
                raise RuntimePatchError(
                    f"fix {number} has no runtime form on line {line.name}",
                    expected=f"one of the fixes with a runtime form there:"
                    f" {', '.join(str(f.fix.number) for f in available) or 'none'}",
                    found=f"fix {number}: {why}",
                    hint="use the diff-patched build for it (`executorch-arm-overlay build-wheel`)",
                )
            selected.extend(forms)
        return selected

    def fix(self, number: int) -> tuple[RuntimeFix, ...]:
        """Return the runtime forms of fix ``number`` on the installed line."""
        return tuple(self._select(self.line(), [number]))

    def installed_root(self) -> Path:
        """Return the directory of the importable executorch package (without importing it)."""
        package = self.package_dir()
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimePatchError(
                f"{package} is not importable here",
                expected=f"{package} installed in this interpreter",
                found=f"no {package} package",
                hint=f"install {package} at one of the supported lines",
            )
        return Path(next(iter(spec.submodule_search_locations)))

    def _present(self, numbers: Iterable[int] | None) -> list[RuntimeFix]:
        """Return the selected forms of the installed line; [] when nothing can be patched."""
        try:
            if importlib.util.find_spec(self.package_dir()) is None:
                return []
            line = self.line()
        except OverlayError:
            return []  # not importable, or no line: nothing was applied here
        wanted = None if numbers is None else set(numbers)
        return [f for f in self.forms(line) if wanted is None or f.fix.number in wanted]

    def is_applied(self, number: int) -> bool:
        """Return True when fix ``number`` is applied in this process."""
        present = self._present([number])
        for item in present:  # every form of the fix must be in place
            try:
                _, owner = item.resolve_owner()
            except (ImportError, AttributeError):
                return False  # the function this fix replaces is not there
            if not hasattr(owner, _GUARD.format(number=number, attribute=item.form.attribute)):
                return False
        return bool(present)

    def apply(self, numbers: Iterable[int] | None = None) -> list[int]:
        """Apply the selected fixes (default: every form of the line); return those newly applied.

        Every fix is checked and applied on its own: an already applied fix is skipped, and a
        fix that cannot be applied raises without hiding the state of the others.
        """
        line = self.line()
        selected = self._select(line, numbers)
        root = self.installed_root()
        for item in selected:  # every file as pinned, before anything is replaced
            path = root / item.form.repo_path
            line.pins.check_pristine(
                item.form.repo_path,
                sha256_file(path) if path.is_file() else "missing",
                where=f"runtime patch of {path}",
                hint="this install already carries the diffs (or was edited): refusing to patch"
                " twice; use it without the runtime patch, or reinstall stock executorch",
            )
        applied: list[int] = []
        for item in selected:
            module, owner = item.resolve_owner()
            guard = _GUARD.format(number=item.fix.number, attribute=item.form.attribute)
            if hasattr(owner, guard):
                continue
            _check_untouched(item, module, owner, line)
            original = _snapshot(_raw(owner, item.form.attribute))
            replacement = item.form.build(module, _function_of(original))
            setattr(owner, guard, original)
            _put(owner, item.form.attribute, replacement)
            if item.fix.number not in applied:
                applied.append(item.fix.number)
        return applied

    def originals(self) -> dict[int, tuple[tuple[RuntimeFix, Any], ...]]:
        """Return each runtime form of the installed line with the function it replaces now.

        Called before any other patch runs, these are stock's functions (see :func:`swapped`);
        {} where no line's forms apply (a patched build, a release without a line).
        """
        try:
            forms = self.forms(self.line())
        except OverlayError:
            return {}
        found: dict[int, tuple[tuple[RuntimeFix, Any], ...]] = {}
        for item in forms:
            try:
                _, owner = item.resolve_owner()
                original = _snapshot(_function_of(_raw(owner, item.form.attribute)))
            except (ImportError, AttributeError):
                continue  # not there to replace: the fix cannot be put in place here
            found[item.fix.number] = (*found.get(item.fix.number, ()), (item, original))
        return found

    def undo(self, numbers: Iterable[int] | None = None) -> list[int]:
        """Undo the selected fixes (default: all); return the numbers actually undone."""
        undone: list[int] = []
        for item in self._present(numbers):
            _, owner = item.resolve_owner()
            guard = _GUARD.format(number=item.fix.number, attribute=item.form.attribute)
            if not hasattr(owner, guard):
                continue
            # vars(), not getattr(): a stored staticmethod must not be unwrapped.
            _put(owner, item.form.attribute, _raw(owner, guard))
            delattr(owner, guard)
            if item.fix.number not in undone:
                undone.append(item.fix.number)
        return undone


@contextmanager
def swapped(forms: Iterable[tuple[RuntimeFix, Any]]) -> Iterator[None]:
    """Put each runtime form in place, built on the function given with it, for a while
    (e.g. fix 1 built on stock's function where the seed monkey-patch replaced it)."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for item, function in forms:
            module, owner = item.resolve_owner()
            saved.append((owner, item.form.attribute, _snapshot(_raw(owner, item.form.attribute))))
            _put(owner, item.form.attribute, item.form.build(module, function))
        yield
    finally:
        for owner, attribute, value in reversed(saved):
            _put(owner, attribute, value)


def _check_untouched(selected: RuntimeFix, module: Any, owner: Any, line: Line) -> None:
    function = _function_of(_raw(owner, selected.form.attribute))
    if isinstance(function, dict):
        return  # a table has no owner to compare; the pristine pin of its file stands for it
    qualname = selected.form.attribute
    if owner is not module:
        qualname = f"{owner.__name__}.{selected.form.attribute}"
    where = (getattr(function, "__module__", None), getattr(function, "__qualname__", None))
    if where != (module.__name__, qualname):
        raise RuntimePatchError(
            f"{qualname} was already replaced by another patch: refusing to stack fix"
            f" {selected.fix.number} on it",
            expected=f"the {line.name} function {module.__name__}.{qualname}",
            found=f"{where[0]}.{where[1]}",
            hint="apply only one runtime patch per process (not the seed and this one)",
        )


DEFAULT = Runtime(fixes.REGISTRY)
FIXES = fixes.FIXES  # every registry fix: is_applied() answers for any of them
# this process's fixes, as the module's own: runtime.apply([1, 3])
is_applied = DEFAULT.is_applied
apply = DEFAULT.apply
undo = DEFAULT.undo


def apply_all() -> None:
    """Apply every fix: the default ``FILE.py:FUNCTION``-style entry point."""
    apply()
