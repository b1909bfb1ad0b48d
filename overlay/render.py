"""One renderer per format (Markdown, HTML; JSON via the codec) for a report's blocks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from overlay import codec
from overlay._table import markdown_table


@dataclass(frozen=True)
class Badge:
    """A status: a coloured badge in HTML, bold in Markdown."""

    text: str
    tone: str  # "ok", "warn", "info", "bad"


@dataclass(frozen=True)
class Link:
    """A reference to the heading with ``anchor``: a link in HTML, its text in Markdown."""

    text: str
    anchor: str


Inline = str | Badge | Link


@dataclass(frozen=True)
class Heading:
    """A heading: level 1 is the report's title; ``anchor`` is its id in HTML."""

    text: str
    level: int = 1
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    """A paragraph; with a tone ("pass", "fail") a banner in HTML."""

    text: str
    tone: str = ""


@dataclass(frozen=True)
class Table:
    """A table: a header and rows of cells."""

    header: tuple[str, ...]
    rows: tuple[tuple[Inline, ...], ...]


@dataclass(frozen=True)
class Item:
    """One list item (its parts joined) at a nesting depth."""

    parts: tuple[Inline, ...]
    depth: int = 0


@dataclass(frozen=True)
class Items:
    """A list, nested by each item's depth (an empty one is left out)."""

    items: tuple[Item, ...]

    def __bool__(self) -> bool:
        """Return True when the list has an item."""
        return bool(self.items)


@dataclass(frozen=True)
class Pre:
    """Preformatted text under a summary line (a diff, a conflict region)."""

    summary: str
    text: str


@dataclass(frozen=True)
class Raw:
    """Markup only a page can show (a drawing, a table of its own): the HTML form only."""

    html: str


Block = Heading | Para | Table | Items | Pre | Raw


def item(*parts: Inline, depth: int = 0) -> Item:
    """Return a list item."""
    return Item(parts, depth)


def listing(texts: Sequence[str]) -> Items:
    """Return a flat list of ``texts``, or the one item "none": a list that is always shown."""
    return Items(tuple(map(item, texts or ["none"])))


def _markdown_inline(parts: Sequence[Inline]) -> str:
    """Return inline parts as Markdown: a badge bold, a link its text."""
    return "".join(
        p if isinstance(p, str) else f"**{p.text}**" if isinstance(p, Badge) else p.text
        for p in parts
    )


def markdown(blocks: Sequence[Block]) -> str:
    """Render blocks as Markdown."""
    out: list[str] = []
    for block in blocks:
        if not block or isinstance(block, Raw):  # an empty list, a page's drawing
            continue
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text]
        elif isinstance(block, Para):
            out += [f"**{block.text}**" if block.tone == "fail" else block.text]
        elif isinstance(block, Table):
            cells = [[_markdown_inline([c]) for c in row] for row in block.rows]
            out += markdown_table(block.header, cells)
        elif isinstance(block, Items):
            out += ["  " * i.depth + "- " + _markdown_inline(i.parts) for i in block.items]
        else:
            out += [f"{block.summary}:", "", "```", block.text.rstrip(), "```"]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}
.banner.pass{background:#dff3e3;color:#185c2a}.banner.fail{background:#fbe0e0;color:#8a1c1c}
table{border-collapse:collapse;width:100%;margin:10px 0}
th,td{border:1px solid #d5d9e0;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600}
.ok{background:#d6f0dc;color:#185c2a}.warn{background:#fff0c2;color:#6b5200}
.info{background:#d6e6fb;color:#17407a}.bad{background:#f8d0d0;color:#8a1c1c}
pre{background:#f5f6f8;border:1px solid #e1e4ea;padding:8px;overflow:auto;font-size:12px;
white-space:pre-wrap}
details{margin:6px 0}summary{cursor:pointer}code{font-size:12px}svg{display:block;margin:6px 0}
table.fields{table-layout:fixed}table.fields th:first-child{width:170px}
table.fields td,table.fields th{overflow-wrap:anywhere}
"""


def _html_part(part: Inline) -> str:
    if isinstance(part, Badge):
        return f'<span class="badge {part.tone}">{escape(part.text)}</span>'
    if isinstance(part, Link):
        return f'<a href="#{escape(part.anchor)}">{escape(part.text)}</a>'
    return escape(part)


def _html_items(items: Sequence[Item]) -> list[str]:
    out, depth = ["<ul>"], 0
    for each in items:
        while depth < each.depth:
            out.append("<ul>")
            depth += 1
        while depth > each.depth:
            out.append("</ul>")
            depth -= 1
        out.append(f"<li>{''.join(map(_html_part, each.parts))}</li>")
    return out + ["</ul>"] * (depth + 1)


def html(blocks: Sequence[Block], title: str) -> str:
    """Render blocks as one self-contained HTML page (inline CSS, no script)."""
    out = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>',
        f"<style>{_CSS}</style></head><body>",
    ]
    for block in blocks:
        if not block:  # an empty list
            continue
        if isinstance(block, Heading):
            anchor = f' id="{escape(block.anchor)}"' if block.anchor else ""
            out.append(f"<h{block.level}{anchor}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            tone = f" class='banner {block.tone}'" if block.tone else ""
            out.append(f"<p{tone}>{escape(block.text)}</p>")
        elif isinstance(block, Table):
            header = "".join(f"<th>{escape(h)}</th>" for h in block.header)
            out += [f"<table><thead><tr>{header}", "</tr></thead><tbody>"]
            out += [
                "<tr>" + "".join(f"<td>{_html_part(c)}</td>" for c in row) + "</tr>"
                for row in block.rows
            ]
            out.append("</tbody></table>")
        elif isinstance(block, Items):
            out += _html_items(block.items)
        elif isinstance(block, Raw):
            out.append(block.html)
        else:
            summary = f"<summary>{escape(block.summary)}</summary>"
            out.append(f"<details>{summary}<pre>{escape(block.text)}</pre></details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def json_text(report: object) -> str:
    """Render a report (a result dataclass) as JSON, through the codec."""
    return codec.dumps(report, indent=2) + "\n"


def schema(report: type, title: str) -> str:
    """Return the JSON Schema of a report, derived from its dataclass by the codec."""
    return codec.dumps(codec.schema(report, title=title), indent=2) + "\n"


def write(
    folder: Path,
    stem: str,
    blocks: Sequence[Block],
    report: object,
    suffixes: Sequence[str],
    *,
    title: str = "",
) -> list[Path]:
    """Write ``<stem>.<suffix>`` for each of ``md``, ``html``, ``json`` asked for.

    ``title``: the page's (its first heading's text when not given).
    """
    title = title or next((b.text for b in blocks if isinstance(b, Heading)), stem)
    renderers = {
        "md": lambda: markdown(blocks),
        "html": lambda: html(blocks, title),
        "json": lambda: json_text(report),
    }
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in suffixes:
        path = folder / f"{stem}.{suffix}"
        path.write_text(renderers[suffix](), encoding="utf-8", newline="\n")
        written.append(path)
    return written
