"""Upstream export: the pre-push hook's rules, the mbox format, the ``git am`` round trip."""

from __future__ import annotations

import dataclasses
import datetime
import email
import email.policy
from collections.abc import Mapping
from pathlib import Path

import pytest

from overlay._git import git
from overlay.errors import UpstreamError
from overlay.text.applier import apply_patch, decode, encode
from overlay.text.series import Patch, load_series, parse_patch
from overlay.upstream import prepare
from overlay.upstream.canary import gate
from overlay.upstream.commit_rules import MAX_LINE, Identity, check_message
from overlay.upstream.export import (
    ARM_CC,
    Export,
    apply_mbox,
    branch_name,
    commit_message,
    export_patch,
    format_mbox,
    release_repo,
    write_exports,
)
from overlay.upstream.gitrepo import MAIN_REF, open_upstream
from overlay.upstream.prepare import export_against
from overlay.upstream.releases import load_release, release_metadata
from overlay.upstream.replay import ports_of
from overlay.upstream.results import Status
from overlay.upstream.upstream_pins import for_series

from scaffold import created_diff, make_diff

ROOT = Path(__file__).resolve().parent.parent
SIGNER = Identity("Jane Doe", "jane.doe@example.org")
PATH = "backends/arm/_passes/demo_pass.py"
HEADER = "# Copyright 2026 Arm Limited and/or its affiliates.\n"
BASE = HEADER + "".join(f"value_{i} = {i}\n" for i in range(1, 31))
FIXED = BASE.replace("value_12 = 12\n", "value_12 = 12  # fixed\nFrom = 'not a header'\n")
LONG = (
    "Description: fix the demo pass so that the very long first line is cut\n"
    " The demo pass computed the wrong value for the twelfth entry whenever the"
    " graph had more than one output and that is a really long line to wrap.\n"
    " .\n"
    " See https://example.org/a/very/long/url/that/must/not/be/broken/by/the/wrapper/at/all\n"
)
PORTS = ports_of(load_series(ROOT / "patches" / "1.2.0"))["1.5.1"]  # the 1.5.1 line's patches


def _patch(description: str, *, bug: str = "", base: str = BASE, fixed: str = FIXED) -> Patch:
    header = description + bug + "Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    return parse_patch("0001-demo.patch", header + make_diff(PATH, base, fixed))


def _repo(tmp_path: Path, files: Mapping[str, bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release sources")
    return repo


def _git_am(repo: Path, item: Export) -> None:
    assert apply_mbox(repo, item) == ""


def test_commit_message_follows_the_arm_rules() -> None:
    patch = _patch(LONG, bug="Bug: https://github.com/pytorch/executorch/issues/18491\n")
    message = commit_message(patch, SIGNER)
    lines = message.splitlines()
    assert lines[0] == "Arm backend: Fix the demo pass so that the very long first line is cut"
    assert lines[1] == ""
    assert "Fixes #18491" in lines
    assert ARM_CC[0] in lines and ARM_CC[1] in lines
    assert lines[-1] == "Signed-off-by: Jane Doe <jane.doe@example.org>"
    assert all(len(line) <= MAX_LINE for line in lines if "https://" not in line)
    assert any(line.startswith("https://") and len(line) > MAX_LINE for line in lines)
    assert check_message(message) == []


def test_an_identity_that_breaks_a_rule_is_refused() -> None:
    long_signer = Identity("A Very Long Maintainer Name", "maintainers@" + "x" * 40 + ".org")
    with pytest.raises(UpstreamError, match="refusing to write an mbox") as info:
        export_patch(_patch(LONG), {PATH: BASE.encode()}, signer=long_signer)
    assert "--signoff" in str(info.value)
    assert export_patch(_patch(LONG), {PATH: BASE.encode()}, signer=SIGNER).mbox


def test_bad_description_or_header_is_refused() -> None:
    long_subject = "Description: fix " + "everything " * 7 + "\n"
    with pytest.raises(UpstreamError, match="breaks the Arm backend rules") as info:
        export_patch(_patch(long_subject), {PATH: BASE.encode()}, signer=SIGNER)
    assert "subject is" in str(info.value)
    old = BASE.replace("2026 Arm", "2025 Arm")
    stale = _patch(LONG, base=old, fixed=FIXED.replace("2026 Arm", "2025 Arm"))
    with pytest.raises(UpstreamError, match="lacks '2026 Arm'"):
        export_patch(stale, {PATH: old.encode()}, signer=SIGNER, year=2026)


def test_mbox_is_a_format_patch_message_with_base_commit() -> None:
    text = format_mbox(
        message="Arm backend: Fix it\n\nBody line.\n\nSigned-off-by: Jane Doe <j@x.org>\n",
        author=SIGNER,
        date=datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC),
        diffstat=" a | 1 +\n",
        diff="diff --git a/a b/a\n",
        number=2,
        total=3,
        base_commit="ab" * 20,
    )
    assert text.startswith("From 0000000000000000000000000000000000000000 Mon Sep 17 ")
    message = email.message_from_string(text.split("\n", 1)[1], policy=email.policy.default)
    assert message["Subject"] == "[PATCH 2/3] Arm backend: Fix it"
    assert message["From"] == "Jane Doe <jane.doe@example.org>"
    assert message["Date"] == "Wed, 02 Dec 2026 00:00:00 +0000"
    body = message.get_content()
    assert body.startswith("Body line.\n\nSigned-off-by: Jane Doe <j@x.org>\n---\n a | 1 +\n")
    assert f"\ndiff --git a/a b/a\n\nbase-commit: {'ab' * 20}\n-- \n" in body


def test_git_am_round_trip_and_branch(tmp_path: Path) -> None:
    patch = _patch(LONG, bug="Bug: https://github.com/pytorch/executorch/issues/7\n")
    release = {PATH: BASE.encode(), "backends/arm/other.py": b"x = 1\n"}
    item = export_patch(patch, release, signer=SIGNER, base_commit="cd" * 20)
    repo = _repo(tmp_path, release)
    _git_am(repo, item)
    assert (repo / PATH).read_text() == FIXED  # "From " lines in the diff survive
    assert git(repo, "log", "-1", "--format=%B") == item.message + "\n"
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == str(SIGNER)
    assert git(repo, "status", "--porcelain") == ""
    assert branch_name(item) == "arm-fix-the-demo-pass"  # not "...-so-that": a cut mid-phrase
    head = release_repo(tmp_path / "release", item.before, "cd" * 20)
    assert apply_mbox(head, item) == ""
    assert (head / PATH).read_text() == FIXED
    moved = release_repo(tmp_path / "moved", {PATH: BASE.replace("value_12", "v12").encode()}, "")
    failed = apply_mbox(moved, item)
    assert failed.startswith("git am fails: ") and "does not apply" in failed
    assert "\n" not in failed  # git's lines joined: it goes into a table cell
    assert git(moved, "status", "--porcelain") == ""  # the failed am is aborted
    names = [p.name for p in write_exports([item], tmp_path / "out")]
    assert names == ["0001-demo.mbox", "0001-demo.pr.md"]
    commented = dataclasses.replace(item, comment="### Measurements\n")
    (_, _, comment) = write_exports([commented], tmp_path / "out")
    assert comment.name == "0001-demo.comment.md" and comment.read_text() == commented.comment


def test_the_base_is_main_where_the_patch_applies_there(tmp_path: Path) -> None:
    patch = _patch(LONG)
    clone = _repo(tmp_path, {PATH: ("# moved down\n" * 5 + BASE).encode()})
    scratch = open_upstream(str(clone), tmp_path / "scratch")
    main = scratch.rev(MAIN_REF)
    release = ({PATH: BASE.encode()}, "ab" * 20)
    item = export_against(patch, scratch, main, release, SIGNER)
    assert item.base_commit == main and item.before[PATH].startswith(b"# moved down\n")
    (clone / PATH).write_text(BASE.replace("value_12 = 12\n", "value_12 = 0\n"))
    git(clone, "commit", "-qam", "upstream rewrote the line")
    scratch = open_upstream(str(clone), tmp_path / "scratch")
    item = export_against(patch, scratch, scratch.rev(MAIN_REF), release, SIGNER)
    assert (item.base_commit, item.before) == ("ab" * 20, release[0])


def test_a_created_file_exports_as_a_new_file_git_am_creates(tmp_path: Path) -> None:
    """A patch creating a shader beside an edit: git's new-file diff, ``git am`` makes it,
    the same bytes under a hostile git config (renames=copies finds no copy), and a base
    that holds the file already refuses the export."""
    shader = "backends/arm/vgf/shaders/new.glsl"
    text = BASE.replace("value_3 = 3", "nearest = 3")  # a near copy of the file it edits
    diff = make_diff(PATH, BASE, FIXED) + created_diff(shader, text)
    patch = parse_patch(
        "0001-demo.patch", LONG + "Forwarded: no\nLast-Update: 2026-12-02\n---\n" + diff
    )
    release = {PATH: BASE.encode()}
    item = export_patch(patch, release, signer=SIGNER, base_commit="cd" * 20, year=2026)
    assert item.before == {PATH: BASE.encode()}
    assert item.after == {PATH: FIXED.encode(), shader: text.encode()}
    assert f"diff --git a/{shader} b/{shader}\nnew file mode 100644\n" in item.mbox
    assert f" create mode 100644 {shader}\n" in item.mbox
    how, landed = prepare.landed(patch, release, release)  # as the export lands it on main
    assert how.status is Status.APPLIES and set(landed) == {PATH, shader}
    on_main = export_patch(patch, release, signer=SIGNER, base_commit="cd" * 20, year=2026,
                           after=landed)  # fmt: skip
    assert (on_main.before, on_main.mbox) == (item.before, item.mbox)
    with gate.global_git_config(tmp_path / "hostile"):
        (tmp_path / "hostile").write_text(gate.HOSTILE_GITCONFIG)
        again = export_patch(patch, release, signer=SIGNER, base_commit="cd" * 20, year=2026)
    assert again.mbox == item.mbox
    repo = _repo(tmp_path, release)
    _git_am(repo, item)
    assert (repo / shader).read_text() == text
    assert git(repo, "status", "--porcelain") == ""
    with pytest.raises(UpstreamError) as info:
        export_patch(patch, {**release, shader: b"x\n"}, signer=SIGNER, year=2026)
    assert info.value.message == "0001-demo.patch does not apply to the base release"
    assert "the patch creates the file, and it exists" in str(info.value.found)


def _expected_after(patch: Patch, release: Mapping[str, bytes]) -> dict[str, bytes]:
    texts = {f.path: decode(release[f.path]) for f in patch.files if f.path in release}
    return {p: encode(t) for p, t in apply_patch(patch, texts, allow_offset=True).items()}


@pytest.mark.integration
@pytest.mark.parametrize("number", sorted(PORTS))
def test_the_1_5_1_ports_export_hook_clean_and_git_am(tmp_path: Path, number: int) -> None:
    """The ports sent upstream: hook rules, a test under backends/arm/test, git am exact."""
    from overlay.lines import pins

    line = ROOT / "patches" / "1.2.0"
    release = load_release(pins.load(line), for_series(line), "1.5.1")
    port = PORTS[number]
    files = release.files  # backends/arm/**, its tests included
    _, commit = release_metadata(release.wheel)
    assert commit is not None and len(commit) == 40
    item = export_patch(port, files, signer=SIGNER, base_commit=commit, year=2026)
    assert item.subject == f"Arm backend: {port.subject}"
    assert check_message(item.message) == []
    assert any(p.startswith("backends/arm/test/") for p in item.after)
    assert f"base-commit: {commit}" in item.mbox
    assert item.after == _expected_after(port, files)
    repo = _repo(tmp_path, {p: files[p] for p in port.targets if p in files})
    _git_am(repo, item)
    for path, data in item.after.items():
        assert (repo / path).read_bytes() == data, path


def test_the_release_is_checked_with_the_lines_diff_where_mains_context_differs(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from overlay.upstream.prepare import _git_am

    on_main = BASE.replace("value_10 = 10\n", "value_10 = 10  # main\n")  # context moved
    repo = _repo(tmp_path, {PATH: on_main.encode()})
    patch = _patch(LONG)  # the line's diff, made against the release
    fixed_on_main = on_main.replace("value_12 = 12\n", "value_12 = 12  # fixed\nFrom = 'x'\n")
    landed = {PATH: fixed_on_main.encode()}
    pr = export_patch(patch, {PATH: on_main.encode()}, signer=SIGNER, after=landed)
    release = export_patch(patch, {PATH: BASE.encode()}, signer=SIGNER, base_commit="cd" * 20)
    scratch = SimpleNamespace(path=repo)
    out = tmp_path / "out" / "branches" / "0001-demo"
    assert _git_am(scratch, "main", (pr, release), out) == ("", "")  # type: ignore[arg-type]
    assert (tmp_path / "out" / "release" / "0001-demo" / PATH).read_text() == FIXED
    # the PR's own mbox carries main's context, which the release does not have
    moved = release_repo(tmp_path / "moved", {PATH: BASE.encode()}, "")
    assert apply_mbox(moved, pr).startswith("git am fails: ")
