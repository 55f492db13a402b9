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

Only LangGraph's own `JsonPlusSerializer` is spliced; any other serializer (encryption, a
subclass) and any value msgpack refuses (the serializer may fall back to pickle) take the
serializer's own `dumps_typed`. Kept bytes are bounded (`max_bytes`, least recently packed
thread forgotten first) and forgotten when a thread is deleted.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import ChannelVersions, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _msgpack_enc

__all__ = ["ChannelPacker"]

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
        if not self._splices:
            return self.serde.dumps_typed(checkpoint)
        try:
            blob = self._pack(thread, parent, checkpoint, new_versions)
        except (ormsgpack.MsgpackEncodeError, TypeError, ValueError):
            self.forget(thread)
            return self.serde.dumps_typed(checkpoint)
        return "msgpack", blob

    def _pack(
        self,
        thread: tuple[str, str],
        parent: str | None,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
    ) -> bytes:
        packed_id, kept = self._kept.get(thread, ("", {}))
        if parent is None or packed_id != parent:
            kept = {}  # another branch (or the first checkpoint): nothing to reuse
        versions: Mapping[str, Any] = checkpoint["channel_versions"]
        values: Mapping[str, Any] = checkpoint["channel_values"]
        fresh: dict[str, tuple[Any, bytes]] = {}
        parts = [_map_header(len(values))]
        for channel, value in values.items():
            version = versions.get(channel)
            old = kept.get(channel)
            if old is not None and old[0] == version and channel not in new_versions:
                packed = old[1]
            else:
                packed = _packed_channel(value)
            if version is not None:
                fresh[channel] = (version, packed)
            parts += (_msgpack_enc(channel), packed)
        blob = [_map_header(len(checkpoint))]
        for key, value in checkpoint.items():
            blob.append(_msgpack_enc(key))
            blob.append(b"".join(parts) if key == "channel_values" else _msgpack_enc(value))
        self._keep(thread, (checkpoint["id"], fresh))
        return b"".join(blob)

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
