"""Storage contract gaps found while building the gateway, kept as regression tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from foldwise.gateway.storage import TranscriptEvent, open_storage


async def test_retrying_add_receipt_stores_the_receipt_once() -> None:
    async with open_storage("memory://") as storage:
        await storage.create_thread("t")
        marker = TranscriptEvent(
            kind="compaction", message={"receipt_id": "cmp_1"}, message_id="compaction:cmp_1"
        )
        await storage.add_receipt("t", {"id": "cmp_1"}, run_id="r1", marker=marker)
        # The same call again, as after a lost acknowledgement or a crash-and-retry.
        await storage.add_receipt("t", {"id": "cmp_1"}, run_id="r1", marker=marker)
        markers = [e for e in await storage.list_transcript("t") if e.kind == "compaction"]
        receipts = await storage.list_receipts("t")
        assert len(markers) == 1
        assert len(receipts) == len(markers)


@pytest.mark.parametrize("where", ["memory", "file"])
async def test_a_write_cancelled_mid_transaction_leaves_the_connection_usable(
    tmp_path: Path, where: str
) -> None:
    # A run cancelled (shutdown, lost lease) while the recorder writes must not leave the
    # shared SQLite connection inside a transaction: every later write would fail with
    # "cannot start a transaction within a transaction".
    url = "memory://" if where == "memory" else f"sqlite:///{tmp_path / 'g.db'}"
    async with open_storage(url) as storage:
        await storage.create_thread("t")
        event = TranscriptEvent(kind="message", message={"content": "x"}, message_id="m1")
        for _ in range(3):  # cancel at successive await points of the write
            task = asyncio.ensure_future(storage.append_transcript("t", [event]))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await storage.update_thread("t", status="busy")
        thread = await storage.get_thread("t")
        assert thread is not None and thread.status == "busy"
