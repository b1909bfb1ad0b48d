"""List the files a patch creates in upstream's BUCK resource lists, beside their siblings
(no wheel holds a BUCK file: the export adds the entry on main, docs/upstream.md)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping

_ENTRY = re.compile(r'^(?P<indent>\s*)"(?P<path>[^"]+)",\s*$')


def candidates(created: Iterable[str]) -> list[str]:
    """Return the BUCK files that may list ``created`` files: every ancestor folder's."""
    found: dict[str, None] = {}
    for path in created:
        folder = posixpath.dirname(path)
        while True:
            found[posixpath.join(folder, "BUCK")] = None
            if not folder:
                break
            folder = posixpath.dirname(folder)
    return list(found)


def listed(created: Iterable[str], bucks: Mapping[str, bytes]) -> dict[str, bytes]:
    """Return each BUCK of ``bucks`` that lists a sibling of a created file, with it added
    in sorted order to the nearest block of its folder's entries (a file already listed, or
    whose folder no BUCK lists, is left out)."""
    texts = {path: data.decode("utf-8").splitlines(keepends=True) for path, data in bucks.items()}
    changed: set[str] = set()
    for path in sorted(created):
        for buck in candidates([path]):
            lines = texts.get(buck)
            if lines is None:
                continue
            entry = posixpath.relpath(path, posixpath.dirname(buck) or ".")
            run = _run(lines, entry)
            if not run:
                continue
            if all(match["path"] != entry for _, match in run):
                smaller = [i for i, match in run if match["path"] < entry]
                at = smaller[-1] + 1 if smaller else run[0][0]
                lines.insert(at, f'{run[0][1]["indent"]}"{entry}",\n')
                changed.add(buck)
            break
    return {buck: "".join(texts[buck]).encode("utf-8") for buck in sorted(changed)}


def _run(lines: list[str], entry: str) -> list[tuple[int, re.Match[str]]]:
    """Return the first run of consecutive entries of ``entry``'s folder that holds a file of
    its extension (a BUCK lists sources and resources apart), or ``[]``."""
    folder, suffix = posixpath.dirname(entry), posixpath.splitext(entry)[1]
    runs: list[list[tuple[int, re.Match[str]]]] = []
    for i, line in enumerate(lines):
        match = _ENTRY.match(line)
        if match is None or posixpath.dirname(match["path"]) != folder:
            continue
        if runs and runs[-1][-1][0] == i - 1:
            runs[-1].append((i, match))
        else:
            runs.append([(i, match)])
    return next((run for run in runs if any(m["path"].endswith(suffix) for _, m in run)), [])
