"""Upstream: how the series fares on executorch releases, what moves, what is sent upstream.

Facts are gathered by ``matrix`` (a patch's text on a release), ``releases`` (release
wheels, their metadata, the series' ports), ``behaviour`` (corpus cases on stock and
patched envs of a release) and ``upstream_tests`` (upstream's pytest tests, each test's
reason); ``facts`` holds their types and ``verdicts`` decides every upstream verdict from
them. ``retarget`` moves a line to a new release (one module per job), ``prepare`` and
``export`` (with ``commit_rules`` and ``lint``) write what is sent upstream, ``render``
shows the matrix and the retarget. ``upstream_pins`` reads ``patches/upstream.toml``.
"""
