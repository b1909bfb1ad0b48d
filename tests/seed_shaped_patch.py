"""A runtime patch shaped like the seed monkey-patch, for runs where the seed file is absent.

The seed (a team's ``arm_backend_monkey_patch.py``, written for executorch 1.2.0) carries
fixes 2, 3 and 4 and a first form of fix 1 that keeps every terminal int16 quantize
unfolded, on integer-only specs too; it lacks fixes 5 and 6. :func:`apply` is that shape:
fixes 2-4 as the 1.2.0 line writes them (:mod:`overlay.runtime`), fix 1 as the seed does.
:func:`apply_with_planted_change` also scales every conv's output rescale by 2%: a real
difference from the diffs, which no divergence rule may declare.
"""

from __future__ import annotations

from typing import Any

SEED_FIXES = (2, 3, 4)  # the seed's fixes whose line forms are the seed's own
PLANTED_SCALE = 1.02


def apply() -> None:
    """Apply fixes 2-4 of the line, and fix 1 as the seed wrote it."""
    import torch
    from executorch.backends.arm._passes import fold_qdq_with_annotated_qparams_pass as fold

    from overlay import runtime

    runtime.apply(SEED_FIXES)
    original = fold.FoldAndAnnotateQParamsPass.is_foldable

    def feeds_grid_sampler(q_node: Any) -> bool:
        return any(
            "grid_sampler" in str(consumer.target)
            for dq in q_node.users
            if dq.op == "call_function" and dq.target in fold.DQ_OPS
            for consumer in dq.users
        )

    def keeps_int16_quantize(node: Any) -> bool:
        return any(
            user.op == "call_function"
            and user.target in fold.Q_OPS
            and len(user.args) > 5
            and user.args[5] == torch.int16
            and (any(u.op == "output" for u in user.users) or feeds_grid_sampler(user))
            for user in node.users
        )

    def is_foldable(node: Any) -> bool:
        return bool(original(node)) and not keeps_int16_quantize(node)  # every spec

    fold.FoldAndAnnotateQParamsPass.is_foldable = staticmethod(is_foldable)


def apply_with_planted_change() -> None:
    """Apply :func:`apply`, then scale each conv's output rescale by PLANTED_SCALE."""
    from executorch.backends.arm._passes.rewrite_conv_pass import RewriteConvPass

    apply()
    inserted = RewriteConvPass.insert_output_rescale

    def insert_output_rescale(self: Any, graph_module: Any, node: Any) -> Any:
        rescale = inserted(self, graph_module, node)
        scales = [scale * PLANTED_SCALE for scale in rescale.args[2]]
        rescale.args = (*rescale.args[:2], scales, *rescale.args[3:])
        return rescale

    RewriteConvPass.insert_output_rescale = insert_output_rescale
