"""Upstream: how the series fares on executorch releases, and what is sent upstream.

Layout: ``matrix`` (pure: a patch tried on a release's sources, and the verdict),
``releases`` (fetching and reading release wheels and the series' ports), ``export``
(commit messages, mboxes and PR bodies), ``render`` (the matrix as text, Markdown, JSON).
"""
