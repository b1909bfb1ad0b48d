"""Where a lowered program first departs from the exact reference (:mod:`.exact`): the
first quantize node not *held*, nor any right after it (docs/equivalence.md says how)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from overlay.equivalence.worker.exact import Codes, Evaluation

_DUMPED = re.compile(
    r"^Name: (\S+) DType=(INT8|INT16) [^\n]*Shape=\[([^\]]*)\]\n(.*?)(?=\n\s*\n|\nNode type|\Z)",
    re.MULTILINE | re.DOTALL,
)
_NUMPY = {"INT8": "int8", "INT16": "int16"}


def dumped_tensors(text: str) -> set[bytes]:
    """Return the bytes of every int8/int16 tensor in a reference model's intermediate dump."""
    import numpy as np

    found = set()
    for match in _DUMPED.finditer(text):
        body = match.group(4).replace("[", " ").replace("]", " ")
        values = np.array(body.split(), dtype=np.int64)
        found.add(values.astype(_NUMPY[match.group(2)]).tobytes())
    return found


def _layouts(codes: Codes) -> list[bytes]:
    """Return a tap's bytes as the program may hold them: as is, and channels last."""
    numpy_dtype = "int16" if codes.dtype == torch.int16 else "int8"
    tensors = [codes.codes]
    if codes.codes.dim() == 4:
        tensors.append(codes.codes.permute(0, 2, 3, 1))
    return [t.contiguous().numpy().astype(numpy_dtype).tobytes() for t in tensors]


def first_difference(evaluation: Evaluation, held: set[bytes]) -> str:
    """Return where the program first departs from the reference ("" when not told);
    ``held`` are the bytes of the tensors the program computed (see the module)."""
    matched = {t.name: any(b in held for b in _layouts(t.codes)) for t in evaluation.taps}
    for tap in evaluation.taps:
        if tap.on_cpu or matched[tap.name]:
            continue
        if not any(matched.get(n, False) for n in evaluation.downstream.get(tap.name, ())):
            return f"{tap.where} ({tap.name})"
    return ""


def tosa_first_difference(evaluation: Evaluation, tosa: bytes, inputs: list[Any]) -> str:
    """Run a TOSA program on the reference model with its intermediates dumped, and return
    where it first departs from the exact reference ("" when that cannot be told)."""
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
        return first_difference(evaluation, dumped_tensors(dump.read_text(errors="replace")))
