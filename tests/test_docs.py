"""The README and docs/ say only what is true: set-up commands, sessions, CLI, links, example.

The README is the short door: its first commands are the two set-up commands `.ci/run`
relies on. Every `nox -s NAME` shown names a session of noxfile.py; every
`executorch-arm-overlay SUB` / `python -m overlay SUB` names a subcommand of the CLI's parser
with options it has; every relative link resolves (headings included); the README's
lowering example runs (torch); docs/errors.md's table is generated from overlay/errors.py.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docs_tables
import pytest

from overlay import fixes, lines
from overlay.cli import build_parser
from overlay.envs import venvs
from overlay.errors import OverlayError
from overlay.fixes import overview
from overlay.text.series import load_series
from overlay.upstream.upstream_pins import UpstreamPins
from overlay.upstream.upstream_tests import new_tests

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = (README, *sorted(DOCS.glob("*.md")))
MAX_README_LINES = 170
FIRST_SCREEN = 45  # lines
SETUP = (
    "python3 -m pip install nox uv && python3 -m nox -s build_patched_executorch",
    "python3 -m nox -s tests",
)
EXAMPLE_MARKER = "<!-- lowering-example -->"

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
NOX = re.compile(r"(?<![\w-])nox -s ([A-Za-z0-9_.-]+)")
CLI = re.compile(r"(?<![\w/.-])(?:executorch-arm-overlay|python3? -m overlay)[ \t]+(\S[^\n]*)")
CUT = re.compile(r"\s#|\s\|\s|&&|;|\s[<>]\s|\s2>")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _code(text: str) -> list[str]:
    """Return every code line: each line of a fenced block, each inline span (one line)."""
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    lines = [line for block in blocks for line in block.splitlines()]
    return lines + [" ".join(span.split()) for span in INLINE.findall(prose)]


def _prose(text: str) -> str:
    """Return ``text`` without fenced blocks and inline code (links live in prose)."""
    return INLINE.sub("", FENCE.sub("", text))


def _sessions() -> set[str]:
    """Return the names of noxfile.py's sessions, read from its decorators."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator.func if isinstance(decorator, ast.Call) else decorator
            if ast.unparse(call) == "nox.session":
                names.add(node.name)
                if isinstance(decorator, ast.Call):
                    for keyword in decorator.keywords:
                        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                            names.add(str(keyword.value.value))
    return names


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the CLI parser has no subcommands")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _tokens(rest: str) -> list[str]:
    rest = CUT.split(f" {rest}", maxsplit=1)[0]
    try:
        return shlex.split(rest)
    except ValueError:
        return rest.split()


def _cli_commands() -> Iterator[tuple[str, str, list[str]]]:
    """Yield (page, the command as shown, its tokens) for every CLI command in the pages."""
    for page in PAGES:
        for line in _code(_text(page)):
            for match in CLI.finditer(line):
                yield page.name, match.group(0).strip(), _tokens(match.group(1))


def _option_name(token: str) -> str:
    return token.strip("[](),.").split("=", 1)[0]


def _slug(heading: str) -> str:
    """Return GitHub's anchor for a Markdown heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", _text(page)), re.MULTILINE)
    return {_slug(h) for h in headings}


def _readme_example() -> str:
    text = _text(README)
    assert EXAMPLE_MARKER in text, f"README.md has no {EXAMPLE_MARKER} before its example"
    after = text.split(EXAMPLE_MARKER, 1)[1]
    match = re.match(r"\s*```python\n(.*?)^```", after, re.DOTALL | re.MULTILINE)
    assert match, f"README.md: no ```python block right after {EXAMPLE_MARKER}"
    return match.group(1)


# --- (a) the door ------------------------------------------------------------------------


def test_readme_is_short() -> None:
    count = len(_text(README).splitlines())
    assert count <= MAX_README_LINES, (
        f"README.md has {count} lines (at most {MAX_README_LINES}): move details to docs/"
    )


def test_readme_first_screen_says_for_whom_which_fixes_then_the_setup_commands() -> None:
    text = _text(README)
    first = FENCE.search(text)
    assert first, "README.md has no code block"
    before = text[: first.start()]
    assert before.count("\n") <= FIRST_SCREEN, "README.md: the set-up commands must be on screen"
    assert "Ethos-U" in before and "VGF" in before, "README.md: say first for whom the tool is"
    assert docs_tables.README_END in before, "README.md: the fixes by line come before the commands"
    commands = [line.split("  #")[0].strip() for line in first.group(1).splitlines()]
    assert [c for c in commands if c] == list(SETUP)


@pytest.mark.parametrize(
    ("term", "definition"),
    [("line", "A **release line** (\"line\")"), ("ready venv", "A **ready venv** is"),
     ("path (b)", '("path (b)")')],
)  # fmt: skip
def test_readme_defines_its_words_before_using_them(term: str, definition: str) -> None:
    prose = _prose(_text(README).split("# ", 1)[1])  # after the title
    assert definition in prose, f"README.md does not define {term!r}"
    first_use = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", prose)
    assert first_use is not None and first_use.start() >= prose.index(definition) - len(term)


def test_setup_commands_are_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install" in ci and "nox uv" in ci, ".ci/run no longer installs nox and uv"
    sessions = [NOX.search(command) for command in SETUP]  # the README's two, in order
    ran = [m.group(1) for m in re.finditer(r"^nox -s (\S+)", ci, re.MULTILINE)]
    wanted = [m.group(1) for m in sessions if m]
    assert ran[: len(wanted)] == wanted, f".ci/run runs {ran}, not the README's {wanted} first"
    assert set(wanted) <= _sessions()


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {m.split("#")[0] for m in LINK.findall(_prose(_text(README)))}
    missing = [
        f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in linked
    ]
    assert not missing, f"README.md's table does not link: {', '.join(missing)}"


# --- (b) nox sessions ----------------------------------------------------------------------


def test_every_nox_session_shown_exists() -> None:
    sessions = _sessions()
    wrong = []
    for page in PAGES:
        for line in _code(_text(page)):
            for name in NOX.findall(line):
                base = re.sub(r"-\d+\.\d+$", "", name.rstrip("."))
                if base not in sessions:
                    wrong.append(f"{page.name}: nox -s {name}")
    assert not wrong, f"no such session in noxfile.py ({sorted(sessions)}):\n" + "\n".join(wrong)


# The sessions that hand their arguments to one CLI subcommand.
FORWARDED = {
    "upstream": "export-upstream",
    "upstream_suite": "upstream-suite",
    "canary": "canary",
    "retarget": "retarget",
}
NOX_ARGS = re.compile(r"(?<![\w-])nox -s ([a-z_]+) -- ([^`\n]+)")


def test_every_session_command_shown_parses_as_its_subcommand() -> None:
    commands = _subcommands(build_parser())
    wrong = []
    for page in PAGES:
        for line in _code(_text(page)):
            for session, rest in NOX_ARGS.findall(line):
                if session not in FORWARDED:
                    continue
                try:
                    commands[FORWARDED[session]].parse_args(_tokens(rest))
                except SystemExit:
                    wrong.append(f"{page.name}: nox -s {session} -- {rest.strip()}")
    assert not wrong, "session arguments the CLI refuses:\n" + "\n".join(wrong)


# --- (c) CLI commands ----------------------------------------------------------------------


def test_cli_commands_are_found() -> None:
    found = {page for page, _, _ in _cli_commands()}
    assert {"README.md", "in-place.md", "upstream.md"} <= found


def test_every_cli_command_shown_exists_with_its_options() -> None:
    parser = build_parser()
    commands = _subcommands(parser)
    top = _options(parser)
    wrong = []
    for page, shown, tokens in _cli_commands():
        options = top
        command = None
        for token in tokens:
            if command is None and not token.startswith("-"):
                if token not in commands:
                    wrong.append(f"{page}: `{shown}`: no subcommand {token!r}")
                    break
                command = token
                options = _options(commands[token])
            elif token.lstrip("[").startswith("--"):
                name = _option_name(token)
                if name not in options and name not in top:
                    wrong.append(f"{page}: `{shown}`: {command or 'the CLI'} has no {name}")
    assert not wrong, "commands in the docs the CLI does not have:\n" + "\n".join(wrong)


def test_release_lines_says_which_commands_take_line() -> None:
    text = _text(DOCS / "release-lines.md")
    said = re.search(r"lists them\.\s+(.*?) take `--line X\.Y\.Z`", text, re.DOTALL)
    assert said, "docs/release-lines.md no longer says which commands take --line"
    named = set(re.findall(r"`([a-z-]+)`", said.group(1)))
    taking = {
        name for name, sub in _subcommands(build_parser()).items() if "--line" in _options(sub)
    }
    assert named == taking


# --- recipes --------------------------------------------------------------------------------


def test_the_uv_project_recipe_parses_with_uv(tmp_path: Path) -> None:
    """uv itself reads the recipe (offline): a [project] without name or version is refused."""
    recipe = _text(DOCS / "environments.md").split("<!-- uv-project-recipe -->")[1]
    toml = recipe.split("```toml\n", 1)[1].split("```", 1)[0]
    default = lines.default_line(ROOT / "patches").name
    assert f'"executorch[arm]=={default}"' in toml and f"/dist/{default}/simple" in toml
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    read = subprocess.run(
        [venvs.find_uv(), "version", "--offline", "--project", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["my-app", "0.1.0"]


def test_the_macos_lock_sentence_names_the_lines_that_have_one() -> None:
    said = re.search(
        r"only\s+the ([\d.]+) line has a macOS arm64 lock", _text(DOCS / "environments.md")
    )
    assert said, "docs/environments.md no longer says which line has a macOS lock"
    found = overview.summaries(fixes.REGISTRY, lines.all_lines(ROOT / "patches"))
    assert {s.name for s in found if any("macosx" in tag for tag in s.locks)} == {said.group(1)}


# --- (d) links ----------------------------------------------------------------------------


def test_every_relative_link_resolves() -> None:
    wrong = []
    for page in PAGES:
        for target in LINK.findall(_prose(_text(page))):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                wrong.append(f"{page.name}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                wrong.append(f"{page.name}: {target}: no heading #{anchor}")
    assert not wrong, "broken links:\n" + "\n".join(wrong)


def test_slug_is_githubs() -> None:
    assert _slug("The ready venv, and the envs the proof runs in") == (
        "the-ready-venv-and-the-envs-the-proof-runs-in"
    )
    assert _slug("The zoo (`--group zoo`)") == "the-zoo---group-zoo"


# --- (e) the lowering example --------------------------------------------------------------


def test_readme_example_parses() -> None:
    ast.parse(_readme_example())


@pytest.mark.torch
def test_readme_example_lowers(tmp_path: Path) -> None:
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("needs executorch and torch in this interpreter (run through nox)")
    script = tmp_path / "lower.py"
    script.write_text(_readme_example(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "executorch_call_delegate" in done.stdout, done.stdout[-2000:]


# --- the generated exit codes ------------------------------------------------------------


def test_errors_doc_is_current() -> None:
    path = DOCS / "errors.md"
    text = _text(path)
    assert text == docs_tables.update_errors(text), (
        "docs/errors.md's exit codes are stale: regenerate them with\n"
        "PYTHONPATH=. python tests/docs_tables.py"
    )


def test_errors_doc_lists_every_code_with_its_class() -> None:
    table = docs_tables.errors_table()
    assert table.startswith("| code | meaning | error class |\n")
    assert "| 3 | The series file or a patch in it is malformed" in table
    assert table.count("`TargetError`") == 1 and "`DriftError`" not in table


def test_errors_doc_update_needs_both_markers() -> None:
    begin, end = docs_tables.ERRORS_BEGIN, docs_tables.ERRORS_END
    with pytest.raises(OverlayError, match="no generated table of exit codes"):
        docs_tables.update_errors(f"text\n{begin}\n")
    updated = docs_tables.update_errors(f"a\n{begin}\nXYZZY\n{end}\nb\n")
    assert updated.startswith(f"a\n{begin}\n| code |")
    assert updated.endswith(f"{end}\nb\n") and "XYZZY" not in updated


def _cited_tests(text: str) -> list[str]:
    """Return the test names a page cites in backticks: ``test_x``, ``file.py::test_x[p]``
    and ``..._suffix`` (a name shortened to its end); file names and commands are not."""
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        name = span.split("::")[-1].split("[")[0]
        if re.fullmatch(r"test_\w+|\.\.\._\w+", name):
            found.append(name)
    return found


def test_the_upstream_docs_name_only_tests_that_exist() -> None:
    """Gate rule 6: every test docs/upstream.md and docs/fixes.md cite is one a line's
    patches add (a shortened ``..._name`` ends one), or a test module the patches touch or
    a fix runs, or a key of patches/upstream.toml."""
    added, modules = set(), set()
    for line in lines.all_lines(ROOT / "patches"):
        for patch in load_series(line.directory).patches:
            added |= {node.split("::")[-1] for node in new_tests(patch.diff)}
            modules |= {Path(p).stem for p in patch.targets if "/test/" in p}
    modules |= {Path(p).stem for fix in fixes.FIXES for p in fix.upstream.affected_tests}
    keys = {f.name for f in dataclasses.fields(UpstreamPins)}
    for page in ("docs/upstream.md", "docs/fixes.md"):
        cited = _cited_tests((ROOT / page).read_text(encoding="utf-8"))
        unknown = [
            name
            for name in cited
            if name not in added | modules | keys
            and not (name.startswith("...") and any(t.endswith(name[3:]) for t in added))
        ]
        assert unknown == [], page
    assert _cited_tests("`a.py::test_x[int8]` `..._y` `test_add.py -k z` `test_`") == [
        "test_x",
        "..._y",
    ]
