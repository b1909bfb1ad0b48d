"""Line budgets per job (issue 34): what each job of overlay/ may weigh, counted from the tree.

Every module belongs to exactly one job, by its longest prefix below. The budgets are targets,
not tests: the suite prints the table at its end (tests/conftest.py), over-budget jobs marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "overlay"


@dataclass(frozen=True)
class Job:
    """A job of the package: its name, its budget in lines, the module prefixes it owns."""

    name: str
    budget: int | None  # None: not budgeted
    prefixes: tuple[str, ...]


JOBS = (
    Job(
        "build + fixes",
        8_000,
        (
            "overlay",
            "overlay.lines",
            "overlay.text",
            "overlay.fixes",
            "overlay.distribution",
            "overlay.envs",
            "overlay.tree",
        ),
    ),
    Job("equivalence proof", 6_500, ("overlay.equivalence",)),
    Job("upstream engine + PR preparation", 3_500, ("overlay.upstream",)),
    Job("canary (leaf)", 2_000, ("overlay.upstream.canary",)),
    Job("retarget (leaf)", 2_000, ("overlay.upstream.retarget",)),
    Job("in place (leaf)", 2_000, ("overlay.in_place",)),
    Job("HTML drawings (leaf)", 2_000, ("overlay.equivalence.render.html",)),
    Job("command line", None, ("overlay.cli", "overlay.__main__")),
)
TOTAL = 23_000


def module_name(path: Path) -> str:
    """Return the dotted module name of ``path`` under the repository root."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _covers(prefix: str, module: str) -> bool:
    if prefix == "overlay":  # the package's own top-level modules only
        return module == "overlay" or (module.startswith("overlay.") and module.count(".") == 1)
    return module == prefix or module.startswith(prefix + ".")


def job_of(module: str) -> Job:
    """Return the job owning ``module``: its longest covering prefix."""
    covering = [
        (len(prefix), job) for job in JOBS for prefix in job.prefixes if _covers(prefix, module)
    ]
    if not covering:
        raise ValueError(f"{module} belongs to no job")
    return max(covering, key=lambda found: found[0])[1]


def counts() -> dict[str, int]:
    """Return the lines of each job, in JOBS order."""
    found = {job.name: 0 for job in JOBS}
    for path in sorted(PACKAGE.rglob("*.py")):
        found[job_of(module_name(path)).name] += len(path.read_text(encoding="utf-8").splitlines())
    return found


def table() -> list[str]:
    """Return the budget table: each job's lines against its budget, then the total."""
    found = counts()
    rows = []
    for job in JOBS:
        budget = f"{job.budget:,}" if job.budget else "-"
        over = "  OVER" if job.budget and found[job.name] > job.budget else ""
        rows.append(f"  {job.name:<34} {found[job.name]:>7,} / {budget:>6}{over}")
    total = sum(found.values())
    rows.append(
        f"  {'overlay/ in all':<34} {total:>7,} / {TOTAL:>6,}{'  OVER' if total > TOTAL else ''}"
    )
    return ["line budgets per job (tests/budgets.py):", *rows]
