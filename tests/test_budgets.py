"""The line budgets' accounting: every module in one job, the counts adding up."""

from __future__ import annotations

import pytest
from budgets import JOBS, PACKAGE, counts, job_of, module_name, table
from test_architecture import doc_leaves


def test_every_module_belongs_to_exactly_one_job_and_the_counts_add_up() -> None:
    paths = sorted(PACKAGE.rglob("*.py"))
    jobs = {module_name(p): job_of(module_name(p)).name for p in paths}
    assert set(jobs.values()) <= {j.name for j in JOBS}
    assert sum(counts().values()) == sum(len(p.read_text().splitlines()) for p in paths)


def test_a_module_goes_to_its_longest_prefix() -> None:
    assert job_of("overlay.codec").name == "build + fixes"
    assert job_of("overlay.upstream.prepare").name == "upstream engine + PR preparation"
    assert job_of("overlay.upstream.canary.gate").name == "canary (leaf)"
    assert job_of("overlay.in_place.plan").name == "in place (leaf)"
    assert job_of("overlay.cli.in_place").name == "command line"
    with pytest.raises(ValueError, match="belongs to no job"):
        job_of("elsewhere.module")


def test_each_leaf_feature_the_architecture_names_is_a_job_of_its_own() -> None:
    leaves = doc_leaves()  # docs/architecture.md, "Leaf features"
    jobs = [job_of(leaf) for leaf in leaves]
    assert len({job.name for job in jobs}) == len(leaves), jobs
    assert all(
        job.name.endswith("(leaf)") and job.prefixes == (leaf,)
        for job, leaf in zip(jobs, leaves, strict=True)
    )
    assert {j.name for j in JOBS if j.name.endswith("(leaf)")} == {job.name for job in jobs}


def test_the_table_marks_a_job_over_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import budgets

    monkeypatch.setattr(budgets, "counts", lambda: {j.name: 10**6 for j in JOBS})
    shown = table()
    assert shown[0].startswith("line budgets per job")
    assert all(line.endswith("OVER") for line in shown[1:] if "/      -" not in line)
