"""A JSON array kept encoded item by item between metrics dumps, so that a dump encodes only what changed.

A broker's snapshot line holds one item per partition (docs/metrics-dumps.md); encoding all of them every
second costs more than an idle broker with 10,000 partitions may use (issue 18). The snapshot, taken on the
event loop, names only the items that changed since the last dump: new or replaced ones, and None for those
removed. The dump's worker thread applies them (ArrayUpdate, in encode_line) and joins the encodings it kept
for the rest: byte for byte what json.dumps makes of the whole array with the dump's separators. New items go
last, a replaced one keeps its place.
"""

import json
from collections.abc import Hashable
from dataclasses import dataclass


def encode_json(value: object) -> bytes:
    """The dump's JSON: compact separators, ASCII only."""
    return json.dumps(value, separators=(",", ":")).encode()


class EncodedArray:
    """Owned by one dump writer at a time (the dumper runs one write at a time)."""

    def __init__(self) -> None:
        self._items: dict[Hashable, bytes] = {}
        self.items_encoded = 0  # since creation: how much encoding the dumps did

    def __len__(self) -> int:
        return len(self._items)

    def apply(self, changes: dict[Hashable, object | None]) -> bytes:
        """The array after `changes` (key: the new item, or None to drop it), encoded."""
        items = self._items
        for key, item in changes.items():
            if item is None:
                items.pop(key, None)
            else:
                items[key] = encode_json(item)
                self.items_encoded += 1
        return b"[" + b",".join(items.values()) + b"]"


@dataclass(frozen=True, slots=True)
class ArrayUpdate:
    """A snapshot field whose value is `array` after `changes`: applied and encoded with the line, in the
    dump's worker thread."""

    array: EncodedArray
    changes: dict[Hashable, object | None]

    def encode(self) -> bytes:
        return self.array.apply(self.changes)
