"""PT2E quantisation of a case, shared by the TOSA/VGF lowering and each Ethos-U target.

The case picks the scheme; the target picks the quantizer.
"""

from __future__ import annotations

from typing import Any

from overlay.items import CaseInfo


def configure(quantizer: Any, info: CaseInfo) -> Any:
    """Set the case's global quantisation config (a8w8, its SNORM form, a16w8) on a quantizer."""
    from executorch.backends.arm.quantizer import (
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )

    if info.quantize == "a8w8":
        config = get_symmetric_quantization_config
    elif info.quantize == "a8w8_snorm":  # activations in [-127, 127] (executorch 1.5 on)
        from executorch.backends.arm.quantizer import get_vgf_snorm_quantization_config

        config = get_vgf_snorm_quantization_config
    else:
        config = get_symmetric_a16w8_quantization_config
    quantizer.set_global(config(is_per_channel=info.per_channel))
    return quantizer


def case_quantizer(info: CaseInfo, compile_spec: Any) -> Any:
    """Return the configured quantizer a case lowers with: VGF's for VGF cases, else TOSA's."""
    if info.targets_vgf:
        from executorch.backends.arm.quantizer import VgfQuantizer
        from executorch.backends.arm.vgf import VgfCompileSpec

        return configure(VgfQuantizer(VgfCompileSpec(info.spec)), info)
    from executorch.backends.arm.quantizer import TOSAQuantizer

    return configure(TOSAQuantizer(compile_spec), info)


def convert(exported: Any, inputs: tuple[Any, ...], quantizer: Any) -> Any:
    """Return the fake-quantised module: prepared, calibrated on ``inputs``, converted."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)
