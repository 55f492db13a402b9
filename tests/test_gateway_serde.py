"""The wire's JSON: orjson's fast path answers exactly what the pure-Python path answers.

`jsonable` and `dumps` try orjson first (with `_shallow` for what it does not know) and fall
back to `_plain`; whichever path a value takes, the JSON must be the same.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import PurePosixPath
from typing import Any, NamedTuple
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

import foldwise.gateway._serde as serde
from foldwise.gateway._serde import _plain, dumps, jsonable, sse_frame


class Colour(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    label: str
    _hidden: float = 0.5


class Task(NamedTuple):
    id: str
    name: str


class Model(BaseModel):
    when: datetime
    tags: set[str]


class Odd:
    def __repr__(self) -> str:
        return "Odd()"


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits: orjson refuses
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # lone surrogates included: orjson refuses them
    st.sampled_from(
        [
            datetime(2026, 12, 5, 20, 1, 2, 345678),
            datetime(2026, 12, 5, tzinfo=UTC),
            datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
            date(2026, 2, 3),
            time(4, 5, 6),
            timedelta(seconds=90.5),
            UUID(int=7),
            PurePosixPath("/a/b"),
            Colour.RED,
            Colour.PAIR,
            Level.HIGH,
            b"\x00\xffbytes",
            Point(1, "p"),
            Task("t1", "tool"),
            Odd(),
            Model(when=datetime(2026, 1, 1), tags={"a"}),
            HumanMessage("hi \ud800 there", id="h1"),
            AIMessage(
                "answer",
                id="a1",
                usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
            ),
            ToolMessage("out", tool_call_id="c1", artifact={"k": b"raw"}),
        ]
    ),
)
KEYS = st.one_of(st.text(max_size=5), st.integers(-3, 3), st.booleans(), st.none())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(st.text(max_size=3), max_size=3),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=12,
)


def _refused(value: Any, _depth: int = 0) -> Any:
    raise AssertionError(f"the pure-Python path was taken for {value!r:.80}")


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_both_paths_answer_the_same_json(value: Any) -> None:
    expected = _plain(value)
    assert jsonable(value) == expected
    assert json.loads(dumps(value)) == expected


def test_the_fast_path_takes_messages_and_the_slow_one_what_orjson_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [HumanMessage("hi", id="h"), AIMessage("re: hi", id="a", artifact=Task("1", "x"))]
    value = {"messages": messages, "when": datetime(2026, 1, 1), "tags": {"a"}, "p": Point(1, "")}
    expected = _plain(value)
    with monkeypatch.context() as patch:
        patch.setattr(serde, "_plain", _refused)
        assert json.loads(dumps(value)) == expected == jsonable(value)
    assert jsonable({"s": "a\ud800b", "n": 2**65, 1: float("inf")}) == {
        "s": "a\ufffdb",
        "n": 2**65,
        "1": None,
    }
    assert dumps("a\ud800b") == '"a\ufffdb"'.encode()


def test_nesting_past_the_limit_is_cut_not_raised() -> None:
    deep: Any = "leaf"
    for _ in range(400):
        deep = [deep]
    text = json.dumps(jsonable(deep))
    assert text.count("[") == 201 and "null" in text
    assert dumps(deep).count(b"[") == 201


def test_sse_frames_are_valid_utf8_json() -> None:
    frame = sse_frame("values", {"t": "x\udc00", "m": [AIMessage("é", id="a")]}, event_id="7")
    head, data = frame.decode("utf-8").split("data: ")
    assert head == "event: values\nid: 7\n"
    assert json.loads(data)["t"] == "x\ufffd"


@dataclasses.dataclass
class Link:
    next: Any
    note: str = "\ud800"  # a lone surrogate: the value takes the pure-Python path


def test_nested_dataclasses_count_one_level_each_on_the_pure_python_path() -> None:
    # Before orjson, `jsonable` cut nesting at 200 levels whatever they were; the pure-Python
    # path counted a dataclass as two (its fields' dict, then the fields) and cut at 100.
    chain: Any = None
    expected: Any = None
    for _ in range(150):
        chain, expected = Link(chain), {"next": expected, "note": "\ufffd"}
    assert jsonable(chain) == expected
    assert json.loads(dumps(chain)) == expected


def test_keys_orjson_refuses_are_written_as_json_writes_them() -> None:
    # As `json.dumps` (and LangGraph Server) write them: True -> "true", None -> "null".
    expected = {"true": 1, "null": 2, "3": [4], "1.5": {"false": 0}}
    value = {True: 1, None: 2, 3: [4], 1.5: {False: 0}}
    assert json.loads(dumps(value)) == jsonable(value) == expected
