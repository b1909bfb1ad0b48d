"""The corpus tables (torch-free): specs, schemes, every fix's claims, the zoo, the probes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from overlay import fixes
from overlay.equivalence import corpus, verdict
from overlay.errors import EquivalenceInputError

CORPUS = Path(corpus.__file__).parent


def test_corpus_covers_specs_quantisations_and_every_fix() -> None:
    cases = {c.name: c for c in corpus.CASES}
    assert len(cases) == len(corpus.CASES) >= 15
    specs = {c.spec for c in cases.values()}
    assert {"TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+FP"} <= specs
    assert any("int16" in s for s in specs)
    assert {c.quantize for c in cases.values()} >= {None, "a8w8", "a16w8"}
    every = {c.name: c for c in corpus.ALL_CASES}
    for entry in fixes.FIXES:
        assert entry.triggers, entry.number
        for trigger in entry.triggers:
            assert trigger.case in every, trigger.case  # every claim names a real case
            if every[trigger.case].group == "core":
                assert every[trigger.case].fast, trigger.case  # and runs in the CI subset
    effects = {t.effect for f in fixes.FIXES for t in f.triggers}
    assert fixes.Effect.REGRESSION not in effects  # no line's patched build regresses a case


def test_grid_warp_family_covers_every_mode_padding_and_spec_outside_the_ci_subset() -> None:
    family = {
        c.name: c for c in corpus.CASES if c.name.endswith(("_a16w8_int16", "_a16w8_intfp16"))
    }
    family = {n: c for n, c in family.items() if n.startswith("grid_warp_")}
    cells = {(n.split("_")[2], n.split("_")[3], c.spec) for n, c in family.items()}
    specs = ("TOSA-1.0+INT+int16", "TOSA-1.0+INT+FP+int16")
    modes, paddings = ("bilinear", "nearest"), ("zeros", "border", "reflection")
    assert cells == {(m, p, s) for m in modes for p in paddings for s in specs}
    assert all(c.targets_vgf and c.quantize == "a16w8" and not c.fast for c in family.values())
    # the nearest shader's ties: declared broken where VGF runs the sampler (FP), on 1.5.1 only
    broken = {n for n, c in family.items() if verdict.expected_broken(c, "1.5.1")}
    assert broken == {f"grid_warp_nearest_{p}_a16w8_intfp16" for p in paddings}
    assert not any(verdict.expected_broken(c, "1.2.0") for c in family.values())


def test_zoo_covers_the_networks_with_int8_and_float_variants() -> None:
    zoo = {c.name: c for c in corpus.ZOO_CASES}
    for network in ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "efficientnet_b0",
                    "deit_tiny", "lstm", "unet", "grid_warp"):  # fmt: skip
        assert {f"zoo_{network}_int8", f"zoo_{network}_fp"} <= set(zoo), network
        assert zoo[f"zoo_{network}_int8"].sqnr_db is not None
    assert all(c.group == "zoo" and c.timeout for c in zoo.values())
    assert [c.name for c in zoo.values() if c.fast] == ["zoo_grid_warp_int16_grid_intfp16"]
    assert len({c.name for c in corpus.ALL_CASES}) == len(corpus.ALL_CASES)
    int16 = [c for c in zoo.values() if c.name.startswith("zoo_grid_warp") and "int16" in c.spec]
    assert {c.spec for c in int16} == {"TOSA-1.0+INT+FP+int16", "TOSA-1.0+INT+int16"}
    claimed = {t.case for f in fixes.FIXES for t in f.triggers}
    assert "zoo_grid_warp_int16_grid_intfp16" in claimed  # fix 1 keeps the quantize (FP)
    assert "zoo_grid_warp_int16_grid_int16" not in claimed  # INT-only: lowered as stock


def test_zoo_gru_keyword_spotter_is_int8_tosa_without_ethos_u() -> None:
    case = corpus.info("zoo_gru_kws_int8")
    assert (case.spec, case.quantize, case.group) == ("TOSA-1.0+INT", "a8w8", "zoo")
    assert corpus.ZOO_NETWORKS[case.name] == "gru_kws"
    assert case.timeout == corpus.ZOO_TIMEOUT_S and case.sqnr_db is not None
    assert not case.ethos_u and not case.fast  # its budget: TOSA and VGF lowered in 600 s
    assert "zoo_gru_kws_fp" not in corpus.ZOO_NETWORKS


def _builder_keys(module: str, table: str) -> set[str]:
    """Return the keys of a builder table in a torch module, read without importing torch."""
    tree = ast.parse((CORPUS / module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == table:
            assert isinstance(node.value, ast.Dict)
            return {str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError(f"no {table} in {module}")


def test_every_case_has_exactly_one_builder() -> None:
    core = _builder_keys("models.py", "BUILDERS")
    networks = _builder_keys("zoo.py", "NETWORKS")
    assert not core & set(corpus.FIX_CASES)  # a fix's own case is built by its module
    assert core | set(corpus.FIX_CASES) == {c.name for c in corpus.CASES}
    assert set(corpus.ZOO_NETWORKS) == {c.name for c in corpus.ZOO_CASES}
    assert set(corpus.ZOO_NETWORKS.values()) == networks  # every network is used
    assert corpus.ZOO_NETWORKS["zoo_resnet18_int8"] == corpus.ZOO_NETWORKS["zoo_resnet18_fp"]
    assert corpus.ZOO_NETWORKS["zoo_grid_warp_int16_grid_int16"] == "grid_warp_int16_grid_int16"


def test_the_cases_and_probes_a_fix_brings_are_its_own() -> None:
    names = [p.name for p in corpus.PROBES]
    assert len(names) == len(set(names)) == len(corpus.PROBE_RUNS)
    for fix in fixes.FIXES:
        mine = [p for p in corpus.PROBES if p.name in {probe.name for probe in fix.probes}]
        assert [p.fix for p in mine] == [fix.number] * len(fix.probes)
        for case in fix.cases:  # shown by this fix alone, and listed with the core cases
            assert {f.number for f, _ in fixes.triggers_of(case.info.name)} == {fix.number}
            assert corpus.info(case.info.name) is case.info and case.info.group == "core"


def test_an_unknown_case_is_an_input_error() -> None:
    assert corpus.info("conv_relu_int8").spec == "TOSA-1.0+INT"
    with pytest.raises(EquivalenceInputError, match="no corpus case 'nope'") as info:
        corpus.info("nope")
    assert info.value.hint is not None and "--list" in info.value.hint
