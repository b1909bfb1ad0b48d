"""The probes in torch: each patched function run directly on a small FX graph.

Every probe (listed in :data:`overlay.equivalence.corpus.PROBES`) returns a JSON-ready
observation; the equivalence run compares it across paths. Worker side (imports torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from overlay.codec import JsonValue
from overlay.equivalence.worker.observe import op_name


def graph_text(graph: Any) -> list[str]:
    """Return a canonical text of an FX graph: one line per node, names by position."""
    names: dict[Any, str] = {}
    lines = []
    for index, node in enumerate(graph.nodes):
        names[node] = f"%{index}"

        def show(value: Any) -> str:
            if isinstance(value, list | tuple):
                inner = ", ".join(show(v) for v in value)
                return f"[{inner}]" if isinstance(value, list) else f"({inner})"
            if value in names:
                return names[value]
            return repr(value)

        target = node.target if node.op != "call_function" else op_name(node.target)
        lines.append(f"%{index} = {node.op} {target} {show(tuple(node.args))}")
    return lines


def _edge_graph() -> tuple[Any, Any]:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 2, 3, 4)
    return graph, x


def _quantized_add(int_dtype: Any, *, dequantize: bool) -> bool:
    from executorch.backends.arm._passes.fold_qdq_with_annotated_qparams_pass import (
        FoldAndAnnotateQParamsPass,
    )
    from executorch.backends.arm.common.annotation_meta import ArmAnnotationInfo
    from executorch.exir.dialects._ops import ops as exir_ops

    graph, x = _edge_graph()
    add = graph.call_function(exir_ops.edge.aten.add.Tensor, (x, x))
    add.meta["custom"] = {ArmAnnotationInfo.CUSTOM_META_KEY: ArmAnnotationInfo(quantized=True)}
    info = torch.iinfo(int_dtype)
    q_args = (add, 0.01, 0, info.min, info.max, int_dtype)
    quant = graph.call_function(
        exir_ops.edge.quantized_decomposed.quantize_per_tensor.default, q_args
    )
    result = quant
    if dequantize:
        result = graph.call_function(
            exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
            (quant, *q_args[1:]),
        )
    graph.output((result,))
    return bool(FoldAndAnnotateQParamsPass.is_foldable(add))


def _quant_properties(target_name: str) -> Any:
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from executorch.backends.arm.quantizer import quantization_annotator as annotator

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    if target_name == "full":
        node = graph.call_function(torch.ops.aten.full.default, ([1, 4], 2.0))
    else:
        node = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 4)
        node.meta["val"] = torch.empty(1, 4)
    graph.output((node,))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    props = annotator.get_quant_properties(node, module, get_symmetric_quantization_config())
    if props is None:
        return None

    def describe(prop: Any) -> Any:
        if prop is None:
            return None
        if isinstance(prop, list):
            return [describe(p) for p in prop]
        spec = getattr(prop, "qspec", None)
        return {
            "index": getattr(prop, "index", None),
            "dtype": str(getattr(spec, "dtype", None)),
            "qspec": type(spec).__name__,
        }

    return {
        "quant_inputs": describe(props.quant_inputs),
        "quant_output": describe(props.quant_output),
    }


def _rewrite_conv(groups: int, transposed: bool) -> list[str]:
    from executorch.backends.arm._passes.rewrite_conv_pass import RewriteConvPass
    from executorch.exir import to_edge

    torch.manual_seed(0)
    if transposed:
        model: Any = torch.nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, groups=groups)
    else:
        model = torch.nn.Conv2d(4, 4, 3, padding=1, groups=groups)
    from executorch.backends.arm.tosa.specification import (
        TosaLoweringContext,
        TosaSpecification,
    )

    program = to_edge(torch.export.export(model.eval(), (torch.randn(1, 4, 6, 6),)))
    exported = program.exported_program()
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+FP")):
        result = RewriteConvPass(exported)(exported.graph_module)
    return graph_text(result.graph_module.graph)


def _memory_format(duplicated: bool) -> list[str]:
    from executorch.backends.arm._passes.to_tosa_memory_format_pass import (
        ToTosaMemoryFormatPass,
    )

    graph, x = _edge_graph()
    x.meta["tosa_spatial_rank"] = 2
    output = graph.output((x, x) if duplicated else (x,))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    ToTosaMemoryFormatPass.insert_input_transpose(output, x, module)
    return graph_text(graph)


def _runners() -> dict[str, Callable[[], JsonValue]]:
    return {
        "is_foldable.int16_output_quantize": lambda: _quantized_add(torch.int16, dequantize=False),
        "is_foldable.int8_output_quantize": lambda: _quantized_add(torch.int8, dequantize=False),
        "is_foldable.int16_quantize_then_dequantize": lambda: _quantized_add(
            torch.int16, dequantize=True
        ),
        "get_quant_properties.full": lambda: _quant_properties("full"),
        "get_quant_properties.add": lambda: _quant_properties("add"),
        "RewriteConvPass.conv2d_fp": lambda: _rewrite_conv(1, transposed=False),
        "RewriteConvPass.grouped_transposed_fp": lambda: _rewrite_conv(2, transposed=True),
        "insert_input_transpose.duplicated_output": lambda: _memory_format(True),
        "insert_input_transpose.single_output": lambda: _memory_format(False),
    }


def run_probe(name: str) -> JsonValue:
    """Run probe ``name`` and return its JSON-ready observation (exceptions propagate)."""
    runners = _runners()
    if name not in runners:
        raise KeyError(f"no probe {name!r}; known: {', '.join(sorted(runners))}")
    value: JsonValue = runners[name]()
    return value
