"""Storage contract gaps found while building the gateway, kept as regression tests."""

from __future__ import annotations

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
