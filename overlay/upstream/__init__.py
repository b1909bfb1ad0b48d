"""Upstream: how a release line's series fares on other bases, what moves, what is sent."""
