"""The report renderers: text (:mod:`.text`), Markdown (:mod:`.markdown`), one HTML page
(:mod:`.html`) and the typed JSON document (:mod:`.document`, its JSON Schema derived from
its type). :mod:`.cells` and :mod:`.sections` are the pieces every form
shares. Everything here reads a typed Report and writes text; nothing runs.
"""
