"""Where a lowered program first departs from the exact reference (:mod:`.exact`): the
first quantize node not *held*, nor any right after it (docs/equivalence.md says how)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from overlay.equivalence.worker.exact import Evaluation

_DUMPED = re.compile(
    r"^Name: (\S+) DType=(INT8|INT16) [^\n]*Shape=\[([^\]]*)\]\n(.*?)(?=\n\s*\n|\nNode type|\Z)",
    re.MULTILINE | re.DOTALL,
)


def first_difference(evaluation: Evaluation, held: set[bytes]) -> str:
    """Return where the program first departs from the reference ("" when not told);
    ``held`` are the bytes of the tensors the program computed (see the module)."""
    matched = {}
    for tap in evaluation.taps:  # its codes as the program may hold them: as is, channels last
        codes, dtype = tap.codes.codes, "int16" if tap.codes.dtype == torch.int16 else "int8"
        layouts = [codes, codes.permute(0, 2, 3, 1)] if codes.dim() == 4 else [codes]
        matched[tap.name] = any(
            t.contiguous().numpy().astype(dtype).tobytes() in held for t in layouts
        )
    for tap in evaluation.taps:
        if tap.on_cpu or matched[tap.name]:
            continue
        if not any(matched.get(n, False) for n in evaluation.downstream.get(tap.name, ())):
            return f"{tap.where} ({tap.name})"
    return ""


def tosa_first_difference(evaluation: Evaluation, tosa: bytes, inputs: list[Any]) -> str:
    """Run a TOSA program on the reference model with its intermediates dumped, and return
    where it first departs from the exact reference ("" when that cannot be told)."""
    import numpy as np
    import tosa_reference_model

    with tempfile.TemporaryDirectory() as folder:
        dump = Path(folder) / "intermediates.txt"
        _, status = tosa_reference_model.run(
            tosa,
            inputs,
            dump_intermediates=1,
            debug_filename=str(dump),
            initialize_variable_tensor_from_numpy=True,
        )
        if status != tosa_reference_model.GraphStatus.TOSA_VALID or not dump.is_file():
            return ""
        held = set()  # the bytes of every int8/int16 tensor dumped
        for match in _DUMPED.finditer(dump.read_text(errors="replace")):
            body = match.group(4).replace("[", " ").replace("]", " ")
            values = np.array(body.split(), dtype=np.int64)
            held.add(values.astype(match.group(2).lower()).tobytes())
        return first_difference(evaluation, held)
