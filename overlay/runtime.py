"""The fixes as a runtime monkey-patch, written for the pinned executorch 1.2.0 source.

Each fix is independent: its own guard, its own undo, applied or skipped on its own. Which
attribute a fix replaces comes from the registry (:mod:`overlay.fixes`); the builders below
make the replacement. The patch refuses another executorch version (RuntimePatchError), an
install that already carries the diffs (a touched file whose sha256 is not the pinned
pristine one: PristineMismatchError), and a function somebody else has already replaced.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from overlay import fixes, lines
from overlay._hashing import sha256_file
from overlay.errors import OverlayError, RuntimePatchError
from overlay.fixes import Fix

_GUARD = "_overlay_runtime_fix_{number}_original"
Builder = Callable[[Any, Any], Any]  # (module, original function) -> replacement attribute


@dataclass(frozen=True)
class RuntimeFix:
    """One registry fix in its runtime form: where it lives and how its replacement is built."""

    fix: Fix
    build: Builder

    @property
    def number(self) -> int:
        """Return the fix number."""
        return self.fix.number

    @property
    def patch(self) -> str:
        """Return the patch file the fix mirrors."""
        return self.fix.patch

    @property
    def repo_path(self) -> str:
        """Return the one repository file the fix replaces a function of."""
        return self.fix.repo_paths[0]

    @property
    def attribute(self) -> str:
        """Return the replaced attribute's name."""
        return self.fix.runtime.attribute

    def module_name(self) -> str:
        """Return the dotted module name of the file this fix patches."""
        return lines.current().module_name(self.repo_path)

    def resolve_owner(self) -> tuple[Any, Any]:
        """Import the module and return (module, object that holds the attribute)."""
        module = importlib.import_module(self.module_name())
        owner = self.fix.runtime.owner
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


# --- fix 1: keep terminal int16 quantize nodes (patch 0001) -------------------------------


def keep_terminal_int16_quantize(module: Any, original: Any) -> Any:
    import torch

    q_ops, dq_ops = module.Q_OPS, module.DQ_OPS
    original_fn = _function_of(original)

    def is_graph_output_quantize(q_node: Any) -> bool:
        return any(user.op == "output" for user in q_node.users)

    def feeds_grid_sampler_through_dq(q_node: Any) -> bool:
        for dq_user in q_node.users:
            if dq_user.op != "call_function" or dq_user.target not in dq_ops:
                continue
            for consumer in dq_user.users:
                if consumer.op != "call_function":
                    continue
                name = str(consumer.target)
                if "grid_sampler.default" in name or "grid_sampler_2d.default" in name:
                    return True
        return False

    def has_terminal_int16_quantize(node: Any) -> bool:
        for user in node.users:
            if user.op != "call_function" or user.target not in q_ops:
                continue
            if len(user.args) <= 5 or user.args[5] != torch.int16:
                continue
            if is_graph_output_quantize(user) or feeds_grid_sampler_through_dq(user):
                return True
        return False

    def is_foldable(node: Any) -> bool:
        # 1.2.0 returns True on exactly the two branches the diff narrows.
        if not original_fn(node):
            return False
        return not has_terminal_int16_quantize(node)

    return staticmethod(is_foldable)


# --- fix 2: leave factory op outputs unannotated (patch 0002) -----------------------------


def skip_factory_op_annotation(module: Any, original: Any) -> Any:
    import torch

    factory_targets = (
        torch.ops.aten.full.default,
        torch.ops.aten.full,
        torch.ops.aten.zeros.default,
        torch.ops.aten.ones.default,
        torch.ops.aten.fill_.Scalar,
        torch.ops.aten.scalar_tensor.default,
    )

    def get_quant_properties(node: Any, gm: Any, quantization_config: Any) -> Any:
        # No earlier branch of the 1.2.0 function matches these targets.
        if node.target in factory_targets:
            return None
        return original(node, gm, quantization_config)

    return get_quant_properties


# --- fix 3: conv rescale qparams from the source conv or its clamp (patch 0003) -----------


def conv_rescale_qparams_from_source(module: Any, original: Any) -> Any:
    get_output_qparams = module.get_output_qparams
    convolution = module.exir_ops.edge.aten.convolution.default
    clamp = module.exir_ops.edge.aten.clamp.default

    def source_conv(tosa_op: Any) -> Any | None:
        # 1.2.0's call() inserts the TOSA conv right after the aten conv it replaces.
        previous = tosa_op.prev
        if (
            previous.op == "call_function"
            and previous.target == convolution
            and tosa_op.args[:1] == previous.args[:1]
        ):
            return previous
        return None

    def effective_output_qparams(node: Any) -> Any:
        try:
            return get_output_qparams(node)
        except ValueError:
            users = list(node.users)
            if (
                len(users) == 1
                and users[0].target == clamp
                and "output_qparams" in users[0].meta
                and len(users[0].meta["output_qparams"]) > 0
            ):
                return get_output_qparams(users[0])
            raise

    def insert_output_rescale(self: Any, graph_module: Any, node: Any) -> Any:
        source = source_conv(node)
        if source is None:
            return original(self, graph_module, node)
        qparams = effective_output_qparams(source)
        had_key = "output_qparams" in node.meta
        saved = node.meta.get("output_qparams")
        node.meta["output_qparams"] = qparams
        try:
            return original(self, graph_module, node)
        finally:
            if had_key:
                node.meta["output_qparams"] = saved
            else:
                del node.meta["output_qparams"]

    return insert_output_rescale


# --- fix 4: one transpose per duplicated graph output slot (patch 0004) -------------------


def distinct_output_transpose_slots(module: Any, original: Any) -> Any:
    exir_ops = module.exir_ops
    create_node = module.create_node
    get_first_fake_tensor = module.get_first_fake_tensor
    pass_class = module.ToTosaMemoryFormatPass

    def replace_input(node: Any, input_node: Any, replacement: Any) -> None:
        if node.op != "output":
            node.replace_input_with(input_node, replacement)
            return
        outputs = node.args[0]
        if not isinstance(outputs, list | tuple):
            raise TypeError(f"Expected output node args to be a list or tuple, got {type(outputs)}")
        rewritten = list(outputs)
        for index, existing in enumerate(rewritten):
            if existing is input_node:
                rewritten[index] = replacement
                break
        else:
            raise RuntimeError(
                "Could not find the original output node while rewriting the output tuple."
            )
        node.args = (rewritten if isinstance(outputs, list) else tuple(rewritten),)

    def insert_input_transpose(node: Any, input_node: Any, graph_module: Any) -> None:
        # The 1.2.0 body, with node.replace_input_with -> replace_input (as in the diff).
        if input_node.target == exir_ops.backend.tosa.TRANSPOSE.default:
            replace_input(node, input_node, input_node.all_input_nodes[0])
            return
        rank = len(get_first_fake_tensor(input_node).size())
        spatial_rank = input_node.meta["tosa_spatial_rank"]
        mem_format = pass_class._channels_last_inverse_order(rank, spatial_rank)
        assert sorted(mem_format) == list(range(rank)), (
            f"bad perm {mem_format} for rank {rank} in insert_input_transpose"
        )
        with graph_module.graph.inserting_before(node):
            permute_node = create_node(
                graph_module.graph,
                exir_ops.backend.tosa.TRANSPOSE.default,
                args=(input_node, list(mem_format)),
                from_node=node,
            )
            replace_input(node, input_node, permute_node)
            permute_node.meta["tosa_dim_order"] = tuple(range(len(input_node.meta["val"].size())))
            permute_node.meta["tosa_spatial_rank"] = spatial_rank

    return staticmethod(insert_input_transpose)


def _runtime_form(entry: Fix) -> RuntimeFix:
    builder = globals().get(entry.runtime.builder)
    if not callable(builder):
        raise OverlayError(
            f"fix {entry.number} names runtime builder {entry.runtime.builder!r}, which"
            " overlay.runtime does not define",
            hint="add the builder to overlay/runtime.py or fix the registry entry",
        )
    return RuntimeFix(entry, builder)


FIXES: tuple[RuntimeFix, ...] = tuple(_runtime_form(entry) for entry in fixes.FIXES)


def fix(number: int) -> RuntimeFix:
    """Return the runtime form of fix ``number`` (an unknown number is an OverlayError)."""
    entry = fixes.by_number(number)
    return next(f for f in FIXES if f.fix is entry)


def _select(numbers: Iterable[int] | None) -> list[RuntimeFix]:
    return list(FIXES) if numbers is None else [fix(n) for n in numbers]


def installed_root() -> Path:
    """Return the directory of the importable executorch package (without importing it)."""
    pinned = lines.current()
    spec = importlib.util.find_spec(pinned.package_dir)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimePatchError(
            "executorch is not importable here",
            expected=f"executorch {pinned.executorch} installed in this interpreter",
            found="no executorch package",
            hint=f"install {pinned.executorch_requirement()}",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def check_target(numbers: Iterable[int] | None = None) -> None:
    """Refuse a non-pinned executorch version or a touched (already diff-patched) file."""
    pinned = lines.current()
    try:
        found = importlib.metadata.version(pinned.package_dir)
        version: Version | None = Version(found)
    except importlib.metadata.PackageNotFoundError:
        found, version = "no executorch distribution", None
    except InvalidVersion:
        version = None
    if version != pinned.executorch:
        raise RuntimePatchError(
            "the runtime patch is written for one executorch release only",
            expected=f"executorch {pinned.executorch}",
            found=f"executorch {found}",
            hint=(
                "a patched build (+armfix) already carries the fixes: do not runtime-patch it;"
                f" otherwise install {pinned.executorch_requirement()}"
            ),
        )
    root = installed_root()
    for selected in _select(numbers):
        path = root / selected.repo_path
        pinned.check_pristine(
            selected.repo_path,
            sha256_file(path) if path.is_file() else "missing",
            where=f"runtime patch of {path}",
            hint="this install already carries the diffs (or was edited): refusing to patch"
            " twice; use it without the runtime patch, or reinstall stock executorch",
        )


def is_applied(number: int) -> bool:
    """Return True when fix ``number`` is applied in this process."""
    selected = fix(number)
    if importlib.util.find_spec(lines.current().package_dir) is None:
        return False
    try:
        _, owner = selected.resolve_owner()
    except (ImportError, AttributeError):
        return False  # another release: the function this fix replaces is not there
    return hasattr(owner, _GUARD.format(number=number))


def _check_untouched(selected: RuntimeFix, module: Any, owner: Any) -> None:
    function = _function_of(_raw(owner, selected.attribute))
    qualname = selected.attribute
    if owner is not module:
        qualname = f"{owner.__name__}.{selected.attribute}"
    where = (getattr(function, "__module__", None), getattr(function, "__qualname__", None))
    if where != (module.__name__, qualname):
        raise RuntimePatchError(
            f"{qualname} was already replaced by another patch: refusing to stack fix"
            f" {selected.number} on it",
            expected=f"the 1.2.0 function {module.__name__}.{qualname}",
            found=f"{where[0]}.{where[1]}",
            hint="apply only one runtime patch per process (not the seed and this one)",
        )


def apply(numbers: Iterable[int] | None = None) -> list[int]:
    """Apply the selected fixes (default: all); return the numbers newly applied.

    Every fix is checked and applied on its own: an already applied fix is skipped, and a
    fix that cannot be applied raises without hiding the state of the others.
    """
    selected = _select(numbers)
    check_target(f.number for f in selected)
    applied: list[int] = []
    for item in selected:
        module, owner = item.resolve_owner()
        guard = _GUARD.format(number=item.number)
        if hasattr(owner, guard):
            continue
        _check_untouched(item, module, owner)
        original = _raw(owner, item.attribute)
        unwrapped = _function_of(original)
        replacement = item.build(module, unwrapped)
        setattr(owner, guard, original)
        setattr(owner, item.attribute, replacement)
        applied.append(item.number)
    return applied


def undo(numbers: Iterable[int] | None = None) -> list[int]:
    """Undo the selected fixes (default: all); return the numbers actually undone."""
    undone: list[int] = []
    for item in _select(numbers):
        if importlib.util.find_spec(lines.current().package_dir) is None:
            break
        _, owner = item.resolve_owner()
        guard = _GUARD.format(number=item.number)
        if not hasattr(owner, guard):
            continue
        # vars(), not getattr(): a stored staticmethod must not be unwrapped.
        setattr(owner, item.attribute, _raw(owner, guard))
        delattr(owner, guard)
        undone.append(item.number)
    return undone


def apply_all() -> None:
    """Apply every fix: the default ``FILE.py:FUNCTION``-style entry point."""
    apply()
