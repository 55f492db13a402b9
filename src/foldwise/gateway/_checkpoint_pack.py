"""`ChannelPacker`: a checkpoint's msgpack blob with unchanged channels packed once.

LangGraph's SQLite saver stores each checkpoint as one msgpack blob of the whole checkpoint,
so every step re-encodes every channel, the message list included, though most steps change
none of it (a foldwise agent takes about eight steps per turn, two of which add a message).
LangGraph's in-memory and PostgreSQL savers store a channel's value only when its version
changes; this packer gives the SQLite blob the same economy without changing its format: it
keeps each channel's packed bytes with the version they were packed at and, when the next
checkpoint of the thread is a child of that one (its parent is the checkpoint they were
packed for), splices the bytes of each channel whose version is unchanged into the blob.
msgpack is compositional (a map is a header followed by its packed keys and values), so the
blob is byte for byte what the serializer writes for the whole checkpoint (a test holds this),
and a value nested too deeply is refused as the serializer refuses it.

One exception, by design: a channel value changed in place by a node without an update (no new
version) is stored as LangGraph's in-memory and PostgreSQL savers store it, as of its last
update, while the thread's bytes are kept here; when they are not (another branch, a restart,
the bound below) the whole checkpoint is packed anew and holds the change. LangGraph state is
updated by what nodes return; of LangGraph's savers only the SQLite one stored such a change.

Large values in their own rows (`pack` with `own_rows_from`): a channel whose packed value is
that many bytes or more is handed back as a `ChannelRow` instead of going into the blob, which
then lists it under `VALUES_KEY` (channel to version), as LangGraph's PostgreSQL saver keeps a
channel's value once per version. The blob is still byte for byte the serializer's, of the
checkpoint without those values and with that key. A `DeltaChannel` snapshot stays in the
blob: LangGraph's delta-history walk reads its seed from there.

Only LangGraph's own `JsonPlusSerializer` is spliced; any other serializer (encryption, a
subclass) and any value msgpack refuses (the serializer may fall back to pickle) take the
serializer's own `dumps_typed`. Kept bytes are bounded (`max_bytes`, least recently packed
thread forgotten first) and forgotten when a thread is deleted.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import ormsgpack
from langgraph.checkpoint.base import ChannelVersions, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _msgpack_enc
from langgraph.checkpoint.serde.types import _DeltaSnapshot

__all__ = ["VALUES_KEY", "ChannelPacker", "ChannelRow", "PackedCheckpoint"]

VALUES_KEY = "foldwise_values"
"""The blob's extra top-level key: each channel stored in its own row, and its version."""


class ChannelRow(NamedTuple):
    """A channel value stored in its own row, keyed by the channel's version."""

    channel: str
    version: str
    type: str
    value: bytes


class PackedCheckpoint(NamedTuple):
    """A checkpoint's blob (and its type) and the values stored beside it."""

    type: str
    blob: bytes
    rows: list[ChannelRow]


_Kept = tuple[str, dict[str, tuple[Any, bytes]]]
"""The checkpoint id packed, and per channel: its version and its packed bytes."""


def _map_header(size: int) -> bytes:
    if size < 16:
        return bytes([0x80 | size])
    if size < 1 << 16:
        return b"\xde" + struct.pack(">H", size)
    return b"\xdf" + struct.pack(">I", size)


_NESTING = b"\x91\x91"
"""Two one-item arrays: the two levels above a channel value (the checkpoint, its values)."""


def _packed_channel(value: Any) -> bytes:
    """A channel value's bytes, packed at its depth in the checkpoint.

    ormsgpack refuses nesting past its recursion limit: packed on its own a value gets two
    more levels than inside the checkpoint, and the serializer would refuse a checkpoint the
    splice would write. Packed two levels down, it is refused exactly when the whole is.
    """
    return _msgpack_enc([[value]])[len(_NESTING) :]


class ChannelPacker:
    """Packs checkpoints for one saver, reusing the bytes of channels whose version held.

    Args:
        serde: The saver's serializer.
        max_bytes: The most packed channel bytes kept, over all threads.
    """

    def __init__(self, serde: SerializerProtocol, *, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.serde = serde
        self.max_bytes = max_bytes
        self._splices = type(serde).dumps_typed is JsonPlusSerializer.dumps_typed
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        self._sizes: dict[tuple[str, str], int] = {}
        self._total = 0

    def dumps_typed(
        self,
        thread: tuple[str, str],
        parent: str | None,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
    ) -> tuple[str, bytes]:
        """``serde.dumps_typed(checkpoint)``, unchanged channels spliced from kept bytes.

        Args:
            thread: The checkpoint's thread id and namespace.
            parent: The id of the checkpoint it follows (None for a thread's first).
            checkpoint: The checkpoint to pack.
            new_versions: The channels written since `parent`.
        """
        packed = self.pack(thread, parent, checkpoint, new_versions)
        return packed.type, packed.blob

    def pack(
        self,
        thread: tuple[str, str],
        parent: str | None,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        *,
        own_rows_from: int | None = None,
    ) -> PackedCheckpoint:
        """The checkpoint packed as `dumps_typed` does, large values handed back apart.

        Args:
            thread: The checkpoint's thread id and namespace.
            parent: The id of the checkpoint it follows (None for a thread's first).
            checkpoint: The checkpoint to pack.
            new_versions: The channels written since `parent`.
            own_rows_from: Channel values packed to this many bytes or more (and with a
                version) become `ChannelRow`s, listed in the blob under `VALUES_KEY`;
                `None` keeps every value in the blob.
        """
        if not self._splices:
            return self._pack_whole(checkpoint, own_rows_from)
        try:
            return self._pack(thread, parent, checkpoint, new_versions, own_rows_from)
        except (ormsgpack.MsgpackEncodeError, TypeError, ValueError):
            self.forget(thread)
            return self._pack_whole(checkpoint, own_rows_from)

    def _pack_whole(self, checkpoint: Checkpoint, own_rows_from: int | None) -> PackedCheckpoint:
        """The serializer's own `dumps_typed`, per large channel and for the rest."""
        if own_rows_from is None:
            return PackedCheckpoint(*self.serde.dumps_typed(checkpoint), [])
        versions: Mapping[str, Any] = checkpoint["channel_versions"]
        inline: dict[str, Any] = {}
        rows: list[ChannelRow] = []
        for channel, value in checkpoint["channel_values"].items():
            version = versions.get(channel)
            if version is not None and not isinstance(value, _DeltaSnapshot):
                type_, data = self.serde.dumps_typed(value)
                if len(data) >= own_rows_from:
                    rows.append(ChannelRow(channel, str(version), type_, data))
                    continue
            inline[channel] = value
        if not rows:
            return PackedCheckpoint(*self.serde.dumps_typed(checkpoint), [])
        refs = {row.channel: versions[row.channel] for row in rows}
        rest = {**checkpoint, "channel_values": inline, VALUES_KEY: refs}
        return PackedCheckpoint(*self.serde.dumps_typed(rest), rows)

    def _pack(
        self,
        thread: tuple[str, str],
        parent: str | None,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        own_rows_from: int | None,
    ) -> PackedCheckpoint:
        packed_id, kept = self._kept.get(thread, ("", {}))
        if parent is None or packed_id != parent:
            kept = {}  # another branch (or the first checkpoint): nothing to reuse
        versions: Mapping[str, Any] = checkpoint["channel_versions"]
        fresh: dict[str, tuple[Any, bytes]] = {}
        parts: list[bytes] = []
        rows: list[ChannelRow] = []
        refs: dict[str, Any] = {}
        for channel, value in checkpoint["channel_values"].items():
            version = versions.get(channel)
            old = kept.get(channel)
            if old is not None and old[0] == version and channel not in new_versions:
                packed = old[1]
            else:
                packed = _packed_channel(value)
            if version is not None:
                fresh[channel] = (version, packed)
                if (
                    own_rows_from is not None
                    and len(packed) >= own_rows_from
                    and not isinstance(value, _DeltaSnapshot)
                ):
                    rows.append(ChannelRow(channel, str(version), "msgpack", packed))
                    refs[channel] = version
                    continue
            parts += (_msgpack_enc(channel), packed)
        values = _map_header(len(parts) // 2) + b"".join(parts)
        blob = [_map_header(len(checkpoint) + (1 if refs else 0))]
        for key, value in checkpoint.items():
            blob.append(_msgpack_enc(key))
            blob.append(values if key == "channel_values" else _msgpack_enc(value))
        if refs:
            blob += (_msgpack_enc(VALUES_KEY), _msgpack_enc(refs))
        self._keep(thread, (checkpoint["id"], fresh))
        return PackedCheckpoint("msgpack", b"".join(blob), rows)

    def _keep(self, thread: tuple[str, str], kept: _Kept) -> None:
        self.forget(thread)
        size = sum(len(packed) for _, packed in kept[1].values())
        if size > self.max_bytes:
            return
        self._kept[thread] = kept
        self._sizes[thread] = size
        self._total += size
        while self._total > self.max_bytes:
            oldest, _ = self._kept.popitem(last=False)
            self._total -= self._sizes.pop(oldest)

    def forget(self, thread: tuple[str, str]) -> None:
        """Drop the kept bytes of `thread` (deleted, or packed by the serializer instead)."""
        self._kept.pop(thread, None)
        self._total -= self._sizes.pop(thread, 0)

    def forget_thread(self, thread_id: str) -> None:
        """Drop the kept bytes of every namespace of `thread_id`."""
        for key in [key for key in self._kept if key[0] == thread_id]:
            self.forget(key)
