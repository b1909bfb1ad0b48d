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
    every = {c.name: c for c in (*corpus.ALL_CASES, *corpus.BYSTANDERS)}
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
    # none is declared broken: fix 8 samples the nearest shader's ties as PyTorch does
    assert not any(
        verdict.expected_broken(c, v) for c in family.values() for v in ("1.2.0", "1.5.1")
    )


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


def test_zoo_gru_keyword_spotter_is_int8_tosa_only_in_600_s() -> None:
    case = corpus.info("zoo_gru_kws_int8")
    assert (case.spec, case.quantize, case.group) == ("TOSA-1.0+INT", "a8w8", "zoo")
    assert corpus.ZOO_NETWORKS[case.name] == "gru_kws"
    assert case.timeout == 600.0 and case.sqnr_db is not None
    assert not case.ethos_u and not case.vgf and not case.fast  # one lowering a path
    assert all(c.vgf for c in corpus.ALL_CASES if c.name != case.name)
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
    bystanders = {c.name for c in corpus.BYSTANDERS}
    assert core | set(corpus.FIX_CASES) == {c.name for c in corpus.CASES} | bystanders
    assert set(corpus.ZOO_NETWORKS) == {c.name for c in corpus.ZOO_CASES}
    assert set(corpus.ZOO_NETWORKS.values()) == networks  # every network is used
    assert corpus.ZOO_NETWORKS["zoo_resnet18_int8"] == corpus.ZOO_NETWORKS["zoo_resnet18_fp"]
    assert corpus.ZOO_NETWORKS["zoo_grid_warp_int16_grid_int16"] == "grid_warp_int16_grid_int16"


def test_bystanders_cover_each_spec_outside_every_fix_and_outside_the_equivalence_run() -> None:
    found = {c.name: c for c in corpus.BYSTANDERS}
    assert len(found) == len(corpus.BYSTANDERS) >= 5
    assert not set(found) & {c.name for c in corpus.ALL_CASES}  # equivalence never selects them
    assert {c.group for c in found.values()} == {corpus.BYSTANDER}
    assert all(corpus.info(name) is case for name, case in found.items())
    assert all(c.note for c in found.values())  # the model and its quantizer, as upstream reads
    specs = {c.spec for c in found.values()}
    assert {"TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+FP", "TOSA-1.0+INT+int16"} <= specs
    assert {c.quantize for c in found.values()} == {None, "a8w8", "a8w8_snorm", "a16w8"}
    # the review's example: conv -> conv, SNORM, integer-only; and the same with the default
    snorm = [c for c in found.values() if c.quantize == "a8w8_snorm"]
    assert [c.spec for c in snorm] == ["TOSA-1.0+INT"]
    assert "get_vgf_snorm_quantization_config" in snorm[0].note
    assert snorm[0].targets_vgf  # its VGF lowering's TOSA is counted too
    assert any(c.quantize == "a8w8" and c.spec == "TOSA-1.0+INT" for c in found.values())
    assert any("grid_sample" in c.note and c.targets_vgf for c in found.values())  # fixes 1, 7
    bugs = {t.case for f in fixes.FIXES for t in f.triggers if t.effect is fixes.Effect.FIXED}
    assert not bugs & set(found)  # a bystander shows no fix's bug


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


def test_every_snorm_case_is_declared_broken_on_the_lines_before_its_quantizer() -> None:
    # get_vgf_snorm_quantization_config is new in executorch 1.5: on the 1.2.0 line a SNORM
    # case fails on every path, which the run reports as a finding unless it is declared
    snorm = [c for c in corpus.ALL_CASES if c.quantize == "a8w8_snorm"]
    assert len(snorm) >= 2
    for case in snorm:
        assert "get_vgf_snorm_quantization_config" in case.expect_broken, case.name
        assert fixes.release_matches(case.broken_releases, "1.2.0"), case.name
        assert not fixes.release_matches(case.broken_releases, "1.5.1"), case.name
