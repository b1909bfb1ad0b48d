"""The forward canary: every release line rebased onto upstream ``main`` (and newer tags).

Layout: ``gitrepo`` (the scratch repository sharing upstream's objects: files at a commit,
commits from files, patch-ids, range-diffs), ``rebase`` (the one replay engine as commits
on a new base), ``forwarded`` (a patch's ``Forwarded:`` matched against upstream history),
``bisect`` (the upstream commit that made a patch redundant or broke it), ``gate``
(regenerating and exporting the series changes no byte), ``host`` (can the newest
published wheel run main's ``backends/arm``; each patch's behaviour there), ``canary_run``
(the whole canary and the page's rows), ``page`` (the status page's layout; its JSON is
:class:`overlay.upstream.results.CanaryReport`).
"""
