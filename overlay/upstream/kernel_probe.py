"""Run by a release env's own Python (``kernel_probe.py OP ...``): prints one JSON object,
which of the quantized out-variant kernels are not registered and why."""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
from pathlib import Path


def main(operators: list[str]) -> None:
    """Print which of ``operators`` the env's torch has no schema for."""
    import torch

    # Import as the backend does: the Arm quantizer first (it defines the quantized_decomposed
    # ops, then loads the kernels). Loading the kernels first fails quietly on 1.2.0, and
    # the module, imported once, never loads them again.
    with contextlib.suppress(Exception):
        import executorch.backends.arm.quantizer
    with contextlib.suppress(Exception):
        import executorch.kernels.quantized  # noqa: F401
    missing = []
    for operator in operators:
        name, _, overload = operator.rpartition(".")
        schemas = torch._C._jit_get_schemas_for_operator(name)
        if overload not in {schema.overload_name for schema in schemas}:
            missing.append(operator)
    load_error = ""
    if missing:
        try:
            import executorch.kernels.quantized as kernels

            folder = Path(kernels.__file__).parent
        except Exception as exc:
            load_error = f"executorch.kernels.quantized does not import: {exc}"
        else:
            for library in sorted(folder.glob("*quantized_ops_aot_lib*")):
                try:
                    ctypes.CDLL(str(library))
                except OSError as exc:
                    load_error = str(exc).replace(str(folder.parents[2]) + "/", "")
    found = {"torch": torch.__version__, "missing": missing, "load_error": load_error}
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
