"""A runtime patch with one planted one-step error: a conv's output RESCALE zero point + 1.

Every value that conv writes is one quantisation step high (where it does not saturate),
a wrong integer program that the fake-quantised reference cannot tell from rounding on a
deep network. The exact reference must read it wrong and name the conv's module
(``nox -s equivalence -- --case zoo_mobilenet_v2_full_int8 --runtime-patch
tests/planted_rescale.py``: its :func:`apply_all`; ``tests/test_equivalence_exact.py``).
Both lines.
"""

from __future__ import annotations

from typing import Any

PLANTED_MODULE = "features.5.block.6"  # a block's projection conv in the zoo's MobileNetV2


def module_path(node: Any) -> str:
    """Return the innermost module an FX node was traced in ("" when unknown)."""
    stack = node.meta.get("nn_module_stack") or {}
    return str(next(reversed(stack.values()))[0]) if stack else ""


def apply_all() -> None:
    """Bump the output zero point of the rescale after the conv of PLANTED_MODULE."""
    from executorch.backends.arm._passes.rewrite_conv_pass import RewriteConvPass

    inserted = RewriteConvPass.insert_output_rescale

    def insert_output_rescale(self: Any, graph_module: Any, node: Any, *rest: Any) -> Any:
        made = inserted(self, graph_module, node, *rest)
        rescale = made[0] if isinstance(made, tuple) else made  # 1.5.1: (node, fake tensor)
        if module_path(node) == PLANTED_MODULE:
            rescale.args = (*rescale.args[:4], rescale.args[4] + 1, *rescale.args[5:])
        return made

    RewriteConvPass.insert_output_rescale = insert_output_rescale
