"""The pre-push hook's docgen, op-support and public API checks, run as the hook runs them.

A fixture repository in the layout of upstream's (``backends/arm/scripts/pre-push`` with its
check functions before the commit loop, a docgen script that writes the VGF partitioner's
docs from its docstrings, a running API manifest and its validator) stands in for main;
a commit that overrides a public method with a new docstring (as 0007 of 2026-12-05 did
with ``VgfPartitioner.register_custom_partition_op``) must fail docgen, one that changes
its signature the manifest too, and one beside them neither.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from overlay._git import git, git_with_env
from overlay.upstream import lint
from overlay.upstream.results import LintReport
from overlay.upstream.verdicts import hook_findings, submission_problems

DOCS = "docs/source/backends/arm-vgf/arm-vgf-partitioner.md"
MANIFEST = "backends/arm/public_api_manifests/api_manifest_running.toml"
PARTITIONER = "backends/arm/vgf/partitioner.py"
HOOK = r"""#!/bin/bash
# The shape of upstream's hook: definitions, then the loop over the commits to push.
[ "$#" -eq 1 ] && is_script_interactive=1 || is_script_interactive=0
if [ $is_script_interactive -eq 1 ]; then
    RED='\e[31m'
    RESET='\e[0m'
fi
DOCGEN_OUTPUTS=("docs/source/backends/arm-vgf/arm-vgf-partitioner.md")
VGF_OP_SUPPORT_OUTPUT="docs/source/backends/arm-vgf/VGF_op_support.md"

is_docgen_trigger_file() {
    case "$1" in
        backends/arm/vgf/*.py) return 0 ;;
    esac
    return 1
}

run_docgen_check() {
    echo -e "[INFO] Running Arm docgen"
    if ! python backends/arm/scripts/docgen/docgen.py; then
        echo -e "${RED}[ERROR]${RESET} Failed to run Arm docgen"
        FAILED=1
        return
    fi
    if ! git diff --quiet HEAD -- "${DOCGEN_OUTPUTS[@]}"; then
        echo -e "${RED}[ERROR]${RESET} Arm docgen updated generated documentation."
        git diff HEAD -- "${DOCGEN_OUTPUTS[@]}"
        FAILED=1
    fi
}

run_vgf_op_support_checks() {
    echo "op support" > "$VGF_OP_SUPPORT_OUTPUT"
    echo -e "[SUCCESS] VGF operator support documentation OK"
}

run_public_api_validator() {
    if ! python backends/arm/scripts/public_api_manifest/validate.py; then
        echo -e "${RED}[ERROR]${RESET} Arm public API manifest validation failed"
        FAILED=1
    fi
}

REMOTE=$(git rev-parse --abbrev-ref --symbolic-full-name @{u} 2>/dev/null)
echo "the commit loop ran"
exit 99
"""
DOCGEN = """\
import inspect
from pathlib import Path

from executorch.backends.arm.vgf.partitioner import VgfPartitioner

lines = []
for name in sorted(n for n in dir(VgfPartitioner) if not n.startswith("_")):
    method = getattr(VgfPartitioner, name)
    lines += [f"def VgfPartitioner.{name}{inspect.signature(method)}:", inspect.getdoc(method), ""]
Path("docs/source/backends/arm-vgf/arm-vgf-partitioner.md").write_text("\\n".join(lines))
"""
VALIDATE = """\
import inspect
import sys
import tomllib

from executorch.backends.arm.vgf.partitioner import VgfPartitioner

with open("backends/arm/public_api_manifests/api_manifest_running.toml", "rb") as f:
    manifest = tomllib.load(f)["python"]
bad = []
for name in sorted(n for n in dir(VgfPartitioner) if not n.startswith("_")):
    key = f"VgfPartitioner.{name}"
    signature = f"{key}{inspect.signature(getattr(VgfPartitioner, name))}"
    if manifest.get(key) != signature:
        bad.append(f"- {key}: signature changed")
        bad.append(f"  current:  {signature}")
print("\\n".join(bad) or "api_manifest_running.toml: public API is up to date.")
sys.exit(1 if bad else 0)
"""
BASE = '''\
class TOSAPartitioner:
    def register_custom_partition_op(self, op: str) -> None:
        """Register a custom op to be considered supported."""

    def partition(self, program: str) -> str:
        """Partition the program."""
        return program


class VgfPartitioner(TOSAPartitioner):
    """Partition for VGF."""
'''
OVERRIDE = '''
    def register_custom_partition_op(self, op: str) -> None:
        """Register ``op`` unless its VGF lowering needs FP that the spec lacks."""
        super().register_custom_partition_op(op)
'''
SIGNATURE = '''
    def register_custom_partition_op(self, op: str, spec: str = "") -> None:
        """Register a custom op to be considered supported."""
        super().register_custom_partition_op(op)
'''
MAIN_DOCS = (
    "def VgfPartitioner.partition(self, program: str) -> str:\nPartition the program.\n\n"
    "def VgfPartitioner.register_custom_partition_op(self, op: str) -> None:\n"
    "Register a custom op to be considered supported.\n"
)
MAIN_MANIFEST = """\
[python]
"VgfPartitioner.partition" = "VgfPartitioner.partition(self, program: str) -> str"
"VgfPartitioner.register_custom_partition_op" = \
"VgfPartitioner.register_custom_partition_op(self, op: str) -> None"
"""


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for path, text in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    identity = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x.org"}
    identity |= {"GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@x.org"}
    git_with_env(repo, identity, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Return a repository in upstream's layout and its main commit (docs up to date)."""
    repo = tmp_path_factory.mktemp("upstream")
    git(repo, "init", "-q", "-b", "main")
    main = _commit(
        repo,
        {
            "backends/arm/scripts/pre-push": HOOK,
            "backends/arm/scripts/docgen/docgen.py": DOCGEN,
            "backends/arm/scripts/public_api_manifest/validate.py": VALIDATE,
            "backends/arm/__init__.py": "",
            "backends/arm/vgf/__init__.py": "",
            "backends/arm/other.py": "x = 1\n",
            PARTITIONER: BASE,
            MANIFEST: MAIN_MANIFEST,
            DOCS: MAIN_DOCS,
            "docs/source/backends/arm-vgf/VGF_op_support.md": "op support\n",
        },
        "main",
    )
    return repo, main


def _python(dest: Path, repo: Path) -> Path:
    """Return the hook's python: this interpreter, with a stand-in executorch to host on."""
    bindir = lint.hook_python(dest, Path(sys.executable), repo)
    package = dest / "site" / "executorch"
    (package / "backends").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "backends" / "__init__.py").write_text("", encoding="utf-8")
    return bindir


def _checks(upstream: tuple[Path, str], tmp: Path, change: dict[str, str]) -> list[LintReport]:
    source, main = upstream
    repo = lint.checkout(source, main, tmp / "branch", "fix")
    _commit(repo, change, "Arm backend: Fix x")
    touched = sorted(change)
    on_main = lint.main_runs(source, main, tmp / "main", Path(sys.executable), touched)
    _python(tmp / "main" / "bin", tmp / "main" / "repo")  # its stand-in executorch
    found = list(lint.hook_checks(repo, touched, _python(tmp / "bin", repo), on_main))
    assert git(repo, "status", "--porcelain").strip() == ""  # what the checks made is undone
    return found


def test_a_new_docstring_on_a_public_method_fails_docgen_not_the_manifest(
    upstream: tuple[Path, str], tmp_path: Path
) -> None:
    docgen, op_support, manifest = _checks(upstream, tmp_path, {PARTITIONER: BASE + OVERRIDE})
    assert [c.ran.rsplit(": ", 1)[-1] for c in (docgen, op_support, manifest)] == list(
        lint.HOOK_CHECKS
    )
    assert "-Register a custom op to be considered supported." in docgen.findings
    assert "+Register ``op`` unless its VGF lowering needs FP that the spec lacks." in (
        docgen.findings
    )
    assert "[ERROR] Arm docgen updated generated documentation." in docgen.findings
    assert not any("\x1b" in line or "commit loop" in line for line in docgen.findings)
    assert op_support.findings == () and manifest.findings == ()
    (problem,) = submission_problems((), LintReport("lintrunner", (), 0.0), [], checks=[docgen])
    assert problem.startswith("backends/arm/scripts/pre-push: run_docgen_check: ")
    assert "line(s) the commit adds: " in problem and "+Register ``op`` unless" in problem


def test_a_changed_signature_fails_the_manifest_too(
    upstream: tuple[Path, str], tmp_path: Path
) -> None:
    docgen, _, manifest = _checks(upstream, tmp_path, {PARTITIONER: BASE + SIGNATURE})
    assert docgen.findings and manifest.findings
    assert "- VgfPartitioner.register_custom_partition_op: signature changed" in manifest.findings
    assert "[ERROR] Arm public API manifest validation failed" in manifest.findings


def test_a_change_beside_the_public_api_passes_and_docgen_is_not_run(
    upstream: tuple[Path, str], tmp_path: Path
) -> None:
    found = _checks(upstream, tmp_path, {"backends/arm/other.py": "x=2\n"})
    assert [c.ran.rsplit(": ", 1)[-1] for c in found] == list(lint.HOOK_CHECKS)
    assert all(c.findings == () for c in found)
    assert found[0].summary == (
        "backends/arm/scripts/pre-push: run_docgen_check: not triggered"
        " (no docgen input file changed)"
    )
    assert submission_problems((), LintReport("l", (), 0.0), [], checks=found) == ()


def test_a_hook_without_the_check_is_a_finding(upstream: tuple[Path, str], tmp_path: Path) -> None:
    source, main = upstream
    repo = lint.checkout(source, main, tmp_path / "branch", "fix")
    _commit(
        repo, {"backends/arm/scripts/pre-push": HOOK.replace("run_public_api_", "run_api_")}, "x"
    )
    run = lint.run_hook_check(repo, "run_public_api_validator", [], _python(tmp_path / "b", repo))
    assert run.status == lint.NOT_DEFINED
    assert run.output == ("backends/arm/scripts/pre-push defines no run_public_api_validator",)


# What docgen printed on upstream main cff6f4dd32 hosted on the executorch 1.5.1 wheel,
# without and with 0007 of 2026-12-05 (cut to the lines that matter, blob ids as printed).
HOSTED_MAIN = (
    "[INFO] Running Arm docgen",
    "W1206 05:06:18.273000 29113 torch/utils/_pytree.py:630] <enum 'ScaleCalculationMode'> is",
    "[ERROR] Arm docgen updated generated documentation.",
    "diff --git a/docs/source/backends/arm-vgf/arm-vgf-partitioner.md b/docs/...",
    "index 66701aceba..718e3fbf63 100644",
    "@@ -50,3 +50,24 @@ Returns:",
    " def VgfPartitioner.register_custom_partition_op(self, op: torch._ops.OpOverload) -> None:",
    " Register a custom op to be considered supported.",
    "+def VgfPartitioner.transform_for_pre_decomposition(self, exported_program: ...",
    "+Transform an ATen program before default decompositions run.",
)
WITH_0007 = (
    "[INFO] Running Arm docgen",
    "W1206 05:09:41.020000 30515 torch/utils/_pytree.py:630] <enum 'ScaleCalculationMode'> is",
    "[ERROR] Arm docgen updated generated documentation.",
    "diff --git a/docs/source/backends/arm-vgf/arm-vgf-partitioner.md b/docs/...",
    "index 3d1f0e11c2..9b0c6a4e7d 100644",
    "@@ -49,3 +49,28 @@ Returns:",
    " ```python",
    " def VgfPartitioner.register_custom_partition_op(self, op: torch._ops.OpOverload) -> None:",
    "-Register a custom op to be considered supported.",
    "+Register ``op`` unless its VGF lowering needs FP that the spec lacks.",
    "+def VgfPartitioner.transform_for_pre_decomposition(self, exported_program: ...",
    "+Transform an ATen program before default decompositions run.",
)


def test_what_hosted_main_prints_without_the_commit_is_not_the_commits() -> None:
    findings, note = hook_findings(1, WITH_0007, 1, HOSTED_MAIN)
    assert findings == (
        "-Register a custom op to be considered supported.",
        "+Register ``op`` unless its VGF lowering needs FP that the spec lacks.",
    )
    hosted = "3 pre-existing lines come from running main's backends/arm over the wheel"
    assert note == hosted
    assert hook_findings(1, HOSTED_MAIN, 1, HOSTED_MAIN) == (
        (),
        f"the commit adds no line ({hosted})",
    )
    assert hook_findings(0, WITH_0007, 1, HOSTED_MAIN) == ((), "")
    one = hook_findings(1, HOSTED_MAIN[-1:], 1, HOSTED_MAIN[-1:])[1]
    assert one.startswith("the commit adds no line (1 pre-existing line comes from")
    alone, none = hook_findings(1, WITH_0007, 0, ())
    assert none == "" and alone[0] == "[ERROR] Arm docgen updated generated documentation."
    assert "[INFO] Running Arm docgen" not in alone and not any("W1206" in a for a in alone)
    assert hook_findings(2, ("[INFO] x",), 0, ()) == (("exit status 2",), "")
    twice = (*HOSTED_MAIN, "+Transform an ATen program before default decompositions run.")
    assert hook_findings(1, twice, 1, HOSTED_MAIN)[0] == (  # each line counted
        "+Transform an ATen program before default decompositions run.",
    )


def test_a_check_that_fails_only_with_the_commit_holds_it_back() -> None:
    found = LintReport("backends/arm/scripts/pre-push: run_docgen_check", ("-a", "+b"), 1.0)
    clean = LintReport("backends/arm/scripts/pre-push: run_public_api_validator", (), 1.0)
    problems = submission_problems([], LintReport("l", (), 0.0), [], checks=[found, clean])
    assert problems == (
        "backends/arm/scripts/pre-push: run_docgen_check: 2 line(s) the commit adds: -a; +b",
    )


def test_a_checks_line_says_clean_only_when_nothing_qualifies_it() -> None:
    check = "backends/arm/scripts/pre-push: run_docgen_check"
    assert LintReport(check, (), 1.0).summary == f"{check}: clean"
    note = "the commit adds no line (47 pre-existing lines come from ...)"
    assert LintReport(check, (), 1.0, note).summary == f"{check}: {note}"
    found = LintReport(check, ("+b",), 1.0, "1 pre-existing line comes from ...")
    assert found.summary == f"{check}: 1 finding(s): +b (1 pre-existing line comes from ...)"
