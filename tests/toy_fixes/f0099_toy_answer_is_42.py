# mypy: allow-subclassing-any
"""Fix 99, a toy for the tests: ``Answer.value`` of the fake ``toyexec`` package says 42.

Shaped like a real fix module (see docs/fixes.md): the registry, the runtime machinery,
the corpus (its case and its probe) and the docs table take it as they take the real ones.
"""

from __future__ import annotations

from typing import Any

from overlay.fixes.model import (
    Case,
    DiffOnly,
    Effect,
    Fix,
    Probe,
    RuntimeForm,
    Trigger,
    UpstreamNote,
)
from overlay.items import CaseInfo

REPO_PATH = "backends/toy/answer.py"


def answer_is_42(module: Any, original: Any) -> Any:
    """Build 9.9.0's replacement of ``Answer.value``."""

    def value(self: Any) -> int:
        """Add one to the answer.

        Example: ``Answer().value()`` on stock toyexec 9.9.0 returns 41.
        Becomes: 42, one more than what stock returns.
        """
        return int(original(self)) + 1

    return value


def answer_module() -> tuple[Any, tuple[Any, ...]]:
    """Build case ``toy_answer``: a module adding the answer (torch imported here only)."""
    import torch

    class AddAnswer(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x + 41

    return AddAnswer(), (torch.zeros(1),)


def answer() -> int:
    """Probe ``Answer.value``: what the installed toyexec answers (41 stock, 42 fixed)."""
    from toyexec.backends.toy.answer import Answer  # type: ignore[import-not-found]

    return int(Answer().value())


FIX = Fix(
    number=99,
    title="the answer is 42",
    repo_paths=(REPO_PATH,),
    runtime={
        "9.9.0": RuntimeForm(REPO_PATH, "Answer", "value", answer_is_42),
        "9.10.0": DiffOnly("the 9.10.0 port changes a constant, no function to replace"),
    },
    claims={"9.9.0": (Trigger("toy_answer", Effect.CHANGED, "toy: the answer moves"),)},
    upstream=UpstreamNote(reproducer="Answer().value()\n"),
    cases=(Case(CaseInfo("toy_answer", "TOSA-1.0+FP", None, fast=True), answer_module),),
    probes=(Probe("Answer.value.toy", "fix 99: the answer", answer),),
)
