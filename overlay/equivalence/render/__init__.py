"""The equivalence report: laid out once as blocks (:mod:`.layout`) for the tool's one
renderer per format (:mod:`overlay.render`: text, Markdown, HTML), and the typed JSON
document (:mod:`.document`, its JSON Schema derived from its type). :mod:`.cells` and
:mod:`.sections` are its words and lines, :mod:`.html` what only the page draws.
Everything here reads a typed Report and writes text; nothing runs.
"""
