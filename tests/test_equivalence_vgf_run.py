"""VGF runs (torch-free part): the emulation layer manifests, written whole, graph layer first."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from overlay.equivalence.worker import vgf_run


def test_layer_manifests_are_rewritten_whole_graph_layer_first(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    manifests = deploy / "share" / "vulkan" / "explicit_layer.d"
    manifests.mkdir(parents=True)
    for stem in ("VkLayer_Graph", "VkLayer_Tensor"):
        layer = {"layer": {"name": stem, "library_path": f"../../../lib/lib{stem}.so"}}
        (manifests / f"{stem}.json").write_text(json.dumps(layer), encoding="utf-8")
    folder = tmp_path / "vgf-layers"
    graph = folder / "0-VkLayer_Graph" / "VkLayer_Graph.json"
    vgf_run._layer_folders(deploy, folder)
    torn = 0
    with ThreadPoolExecutor(4) as pool:  # the workers of a run share the folder
        rewrites = pool.map(lambda _: vgf_run._layer_folders(deploy, folder), range(60))
        for _ in range(600):  # a Vulkan loader reading while other workers rewrite
            try:
                json.loads(graph.read_text(encoding="utf-8"))
            except ValueError:
                torn += 1
        found = list(rewrites)
    assert torn == 0
    assert all(f == found[0] for f in found)
    assert [p.name for p in found[0]] == ["0-VkLayer_Graph", "1-VkLayer_Tensor"]
    for path, stem in zip(found[0], ("VkLayer_Graph", "VkLayer_Tensor"), strict=True):
        assert sorted(p.name for p in path.iterdir()) == [f"{stem}.json"]  # no temporary left
        data = json.loads((path / f"{stem}.json").read_text(encoding="utf-8"))
        assert data["layer"]["library_path"] == str(deploy.resolve() / "lib" / f"lib{stem}.so")
