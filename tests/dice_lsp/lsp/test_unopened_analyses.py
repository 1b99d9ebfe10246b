"""Analyses of files the editor has not opened (read from disk, no version) are kept for the
next request, but only the most recent few: one request after another about large files must
not keep every text in memory."""

from __future__ import annotations

import asyncio

from pygls.workspace import TextDocument

from dice_lsp.lsp.document_analysis import UNOPENED_KEPT, Analyses

KERNEL = "__global__ void k{i}(float* y) {{ y[0] = {i}; }}\n"


def test_only_the_most_recent_unopened_files_are_kept_and_open_ones_all_are():
    async def run() -> None:
        analyses = Analyses()
        opened = TextDocument("file:///open.cu", source=KERNEL.format(i=0), version=1)
        await analyses.of(opened)
        for i in range(3 * UNOPENED_KEPT):
            found = await analyses.of(TextDocument(f"file:///disk{i}.cu", source=KERNEL.format(i=i), version=None))
            assert [u.name for u in found.units] == [f"k{i}"]
        kept = [key for key, (version, _, _) in analyses._latest.items() if version is None]
        assert len(kept) == UNOPENED_KEPT and kept[-1].endswith(f"disk{3 * UNOPENED_KEPT - 1}.cu")
        assert any(key.endswith("open.cu") for key in analyses._latest)  # the editor's documents stay

    asyncio.run(run())
