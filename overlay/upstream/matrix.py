"""The executorch version matrix: the series (and its ports) replayed onto each release."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packaging.version import Version

from overlay.errors import UpstreamError
from overlay.text.series import Series
from overlay.upstream import replay
from overlay.upstream.releases import Release, load_release
from overlay.upstream.results import Matrix, PatchVerdict, parse_applied_upstream
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import text_verdict


def build_matrix(
    series: Series, ports: replay.Ports, releases: Sequence[Release], pins_file: str
) -> Matrix:
    """Replay every patch (cumulatively) and its port onto every release."""
    ordered = sorted(releases, key=lambda r: Version(r.version))
    replays = [
        replay.replay(
            series.patches,
            release.texts,
            frozenset(release.files),
            ports=replay.ports_for(ports, release.version),
            base=release.version,
        )
        for release in ordered
    ]
    rows = []
    for patch, *carries in zip(series.patches, *replays, strict=True):
        header = patch.header.get("Applied-Upstream", "")
        cells = tuple(carry.replayed for carry in carries)
        action, text = text_verdict(parse_applied_upstream(header), cells)
        rows.append(PatchVerdict(patch.name, patch.subject, cells, action, text, header))
    wheels = {r.version: r.record for r in ordered}
    return Matrix(series.digest, pins_file, wheels, tuple(rows))


def matrix_of(
    series: Series, versions: Sequence[str] = (), progress: Callable[[str], None] = lambda _: None
) -> Matrix:
    """Return the version matrix over ``versions`` (default: upstream.toml's matrix releases)."""
    shared = for_series(series.directory)
    chosen = list(dict.fromkeys(versions or shared.matrix_versions))
    if not chosen:
        raise UpstreamError("no releases to check", hint="pass --versions 1.2.0,1.5.1")
    progress(f"version matrix over executorch {', '.join(chosen)} (wheels fetched once, cached)")
    releases = [load_release(series.pins, shared, v) for v in chosen]
    return build_matrix(series, replay.ports_of(series), releases, str(shared.source))
