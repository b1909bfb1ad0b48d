"""Upstream export: commit-message rules, the mbox format and the ``git am`` round trip."""

from __future__ import annotations

import datetime
import email
import email.policy
from collections.abc import Mapping
from pathlib import Path

import pytest

from overlay._git import git
from overlay._hashing import sha256_file
from overlay.applier import apply_patch, decode, encode
from overlay.errors import UpstreamError
from overlay.series import Patch, load_series, parse_patch
from overlay.upstream.export import (
    MAX_LINE,
    Export,
    Identity,
    check_message,
    commit_message,
    export_patch,
    export_upstream,
    format_mbox,
    parse_identity,
    write_exports,
)
from overlay.upstream.releases import load_ports, load_release, run_matrix

from scaffold import make_diff

ROOT = Path(__file__).resolve().parent.parent
SIGNER = Identity("Jane Doe", "jane.doe@example.org")
PATH = "backends/arm/_passes/demo_pass.py"
BASE = "".join(f"value_{i} = {i}\n" for i in range(1, 31))
FIXED = BASE.replace("value_12 = 12\n", "value_12 = 12  # fixed\nFrom = 'not a header'\n")
LONG = (
    "Description: fix the demo pass so that the very long first line is cut\n"
    " The demo pass computed the wrong value for the twelfth entry whenever the"
    " graph had more than one output and that is a really long line to wrap.\n"
    " .\n"
    " See https://example.org/a/very/long/url/that/must/not/be/broken/by/the/wrapper/at/all\n"
)


def _patch(description: str, *, bug: str = "") -> Patch:
    header = description + bug + "Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    return parse_patch("0001-demo.patch", header + make_diff(PATH, BASE, FIXED))


def _repo(tmp_path: Path, files: Mapping[str, bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release sources")
    return repo


def _git_am(repo: Path, item: Export) -> None:
    mbox = repo.parent / f"{item.stem}.mbox"
    mbox.write_text(item.mbox, encoding="utf-8")
    git(repo, "am", "--quiet", str(mbox))


def test_commit_message_follows_the_arm_rules() -> None:
    patch = _patch(LONG, bug="Bug: https://github.com/pytorch/executorch/issues/18491\n")
    message = commit_message(patch, SIGNER)
    lines = message.splitlines()
    assert lines[0] == "Arm backend: Fix the demo pass so that the very long first line is cut"
    assert lines[1] == ""
    assert "Fixes #18491" in lines
    assert lines[-1] == "Signed-off-by: Jane Doe <jane.doe@example.org>"
    assert all(len(line) <= MAX_LINE for line in lines if "https://" not in line)
    assert any(line.startswith("https://") and len(line) > MAX_LINE for line in lines)
    assert check_message(message) == []


def test_check_message_reports_each_broken_rule() -> None:
    good = "Arm backend: Fix it\n\nBody.\n\nSigned-off-by: A <a@b.c>\n"
    assert check_message(good) == []
    assert "does not start with" in check_message(good.replace("Arm backend: ", ""))[0]
    assert "imperative" in check_message(good.replace("Fix it", "Fixes it"))[0]
    assert "imperative" in check_message(good.replace("Fix it", "Fixed it"))[0]
    assert check_message(good.replace("Fix it", "Address it")) == []
    assert "subject is 85" in check_message(good.replace("Fix it", "Fix " + "x" * 68))[0]
    assert "line 3 is 73" in check_message(good.replace("Body.", "b" * 73))[0]
    assert check_message(good.replace("Body.", "https://x.org/" + "b" * 80)) == []
    assert "Signed-off-by" in check_message(good.replace("Signed-off-by", "Signed"))[0]
    assert "line 2" in check_message(good.replace("\n\nBody", "\nBody"))[0]


def test_long_identity_is_exported_with_a_warning() -> None:
    long_signer = Identity("A Very Long Maintainer Name", "maintainers@" + "x" * 40 + ".org")
    item = export_patch(_patch(LONG), {PATH: BASE.encode()}, "1.2.0", signer=long_signer)
    assert len(item.warnings) == 1
    assert "> 72 characters (the Signed-off-by line)" in item.warnings[0]
    assert "--signoff" in item.warnings[0]
    assert export_patch(_patch(LONG), {PATH: BASE.encode()}, "1.2.0", signer=SIGNER).warnings == ()


def test_bad_description_is_refused() -> None:
    long_subject = "Description: fix " + "everything " * 7 + "\n"
    with pytest.raises(UpstreamError, match="breaks the Arm backend rules") as info:
        export_patch(_patch(long_subject), {PATH: BASE.encode()}, "1.2.0", signer=SIGNER)
    assert "subject is" in str(info.value)


def test_parse_identity() -> None:
    assert parse_identity("Jane Doe <jane.doe@example.org>") == SIGNER
    with pytest.raises(UpstreamError, match="not a sign-off identity"):
        parse_identity("jane")


def test_mbox_is_a_format_patch_message() -> None:
    text = format_mbox(
        message="Arm backend: Fix it\n\nBody line.\n\nSigned-off-by: Jane Doe <j@x.org>\n",
        author=SIGNER,
        date=datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC),
        diffstat=" a | 1 +\n",
        diff="diff --git a/a b/a\n",
        number=2,
        total=3,
    )
    assert text.startswith("From 0000000000000000000000000000000000000000 Mon Sep 17 ")
    message = email.message_from_string(text.split("\n", 1)[1], policy=email.policy.default)
    assert message["Subject"] == "[PATCH 2/3] Arm backend: Fix it"
    assert message["From"] == "Jane Doe <jane.doe@example.org>"
    assert message["Date"] == "Wed, 02 Dec 2026 00:00:00 +0000"
    body = message.get_content()
    assert body.startswith("Body line.\n\nSigned-off-by: Jane Doe <j@x.org>\n---\n a | 1 +\n")
    assert "\ndiff --git a/a b/a\n-- \n" in body


def test_git_am_round_trip_synthetic(tmp_path: Path) -> None:
    patch = _patch(LONG, bug="Bug: https://github.com/pytorch/executorch/issues/7\n")
    release = {PATH: BASE.encode(), "backends/arm/other.py": b"x = 1\n"}
    item = export_patch(patch, release, "1.2.0", signer=SIGNER)
    repo = _repo(tmp_path, release)
    _git_am(repo, item)
    assert (repo / PATH).read_text() == FIXED  # "From " lines in the diff survive
    assert git(repo, "log", "-1", "--format=%B") == item.message + "\n"
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == str(SIGNER)
    assert git(repo, "status", "--porcelain") == ""
    written = write_exports([item], tmp_path / "out")
    assert [p.name for p in written] == ["0001-demo.mbox", "0001-demo.pr.md"]
    assert "Fixes #7" in item.pr_body
    assert "### Test plan" in item.pr_body


def _expected_after(patch: Patch, release: Mapping[str, bytes]) -> dict[str, bytes]:
    texts = {f.path: decode(release[f.path]) for f in patch.files}
    return {p: encode(t) for p, t in apply_patch(patch, texts, allow_offset=True).items()}


def _check_round_trip(tmp_path: Path, exports: list[Export], release: Mapping[str, bytes]) -> None:
    repo = _repo(tmp_path, release)
    for item in exports:
        _git_am(repo, item)
        assert check_message(item.message) == []
        for path, data in item.after.items():
            assert (repo / path).read_bytes() == data, path
    log = git(repo, "log", "--format=%s", f"-{len(exports)}").splitlines()
    assert log == [item.subject for item in reversed(exports)]
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.integration
def test_exported_prs_git_am_onto_newest_release(tmp_path: Path) -> None:
    series = load_series(ROOT / "patches")
    matrix = run_matrix(series, ROOT / "patches", ("1.2.0", "1.5.1"))
    ports = load_ports(ROOT / "patches", series)
    exports = export_upstream(series, ports, matrix, signer=SIGNER)
    assert [e.name for e in exports] == ["0001-keep-terminal-int16-quantize.patch"]
    item = exports[0]
    assert (item.base_version, item.source) == ("1.5.1", "port 1.5.1")
    assert item.subject == "Arm backend: Don't fold terminal int16 quantize on FP specs"
    assert "support_float()" in decode(
        item.after["backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py"]
    )
    assert "backends/arm/test/passes/test_fold_qdq_pass.py` (exists)" in item.pr_body
    assert "### Difference from the overlay patch" in item.pr_body
    release = matrix.releases["1.5.1"].files
    port = ports["1.5.1"]["0001-keep-terminal-int16-quantize.patch"]
    assert item.after == _expected_after(port, release)
    _check_round_trip(tmp_path, exports, release)


@pytest.mark.integration
def test_every_pinned_patch_git_ams_onto_the_pinned_release(tmp_path: Path) -> None:
    series = load_series(ROOT / "patches")
    release = load_release(series.pins, str(series.pins.executorch))
    matrix = run_matrix(series, ROOT / "patches", (str(series.pins.executorch),))
    names = [p.name for p in series.patches]
    exports = export_upstream(series, {}, matrix, signer=SIGNER, names=names)
    assert [e.source for e in exports] == ["pinned"] * len(names)
    _check_round_trip(tmp_path, exports, release.files)
    patched = series.expected_patched_sha256()
    repo = tmp_path / "repo"
    for path, digest in patched.items():
        assert sha256_file(repo / path) == digest, path


def test_pr_body_names_the_trigger_cases_of_the_patch() -> None:
    from overlay import fixes
    from overlay.upstream.export import corpus_cases

    entry = fixes.by_number(1)
    described = corpus_cases(entry.stem)
    assert [d.split("`")[1] for d in described] == [t.case for t in entry.triggers]
    assert corpus_cases("0009-not-in-the-registry") == []
