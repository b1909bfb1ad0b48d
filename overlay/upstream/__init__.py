"""Upstream: how a release line's series fares on other bases, what moves, what is sent.

One question, three front-ends: "does line L's series apply on base B, and how does it
behave there". :mod:`.replay` is the one engine (a series and its ports on a release's
sources or an upstream commit), :mod:`.behaviour` and :mod:`.upstream_tests` measure it
(corpus cases, upstream's pytest tests), :mod:`.verdicts` decides every verdict, and
:mod:`.results` holds every result type, encoded by the codec directly and laid out by
:mod:`.reports`. :mod:`.matrix` (each release), :mod:`.retarget` (a new release, a new
line) and :mod:`.canary` (upstream main) are the front-ends; :mod:`.prepare`,
:mod:`.export`, :mod:`.commit_rules` and :mod:`.lint` write what is sent upstream;
:mod:`.releases` fetches release wheels and :mod:`.upstream_pins` reads
``patches/upstream.toml``.
"""
