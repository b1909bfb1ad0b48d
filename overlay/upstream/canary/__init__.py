"""The forward canary: every release line rebased onto upstream ``main`` (and newer tags).

Layout: ``results`` (the typed results, encoded with :mod:`overlay.codec`), ``gitrepo`` (the
scratch repository sharing upstream's objects: files at a commit, commits from files,
patch-ids, range-diffs), ``rebase`` (a series replayed onto a new base with 3-way merges,
each patch classified), ``forwarded`` (a patch's ``Forwarded:`` matched against upstream
history), ``bisect`` (the upstream commit that made a patch redundant or broke it),
``gate`` (regenerating and exporting the series changes no byte), ``host`` (can the newest
published wheel run main's ``backends/arm``; trigger cases there), ``canary_run`` (the whole
canary), ``page`` (the status page: Markdown, HTML, JSON and its schema).
"""
