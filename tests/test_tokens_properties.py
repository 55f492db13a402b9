"""Property: incremental counting always equals counting from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from foldwise.tokens import TokenCounter, estimate_tokens

texts = st.text(alphabet=st.sampled_from("ab 中文1{}\n\\u"), max_size=40)


def _message(kind: int, text: str, ident: int | None) -> BaseMessage:
    msg_id = None if ident is None else f"m{ident}"
    if kind == 0:
        return HumanMessage(text, id=msg_id)
    if kind == 1:
        call = {"name": "f", "args": {"x": text}, "id": f"c{ident}"}
        return AIMessage(text, id=msg_id, tool_calls=[call])
    return ToolMessage(text, tool_call_id=f"c{ident}", id=msg_id)


messages = st.builds(_message, st.integers(0, 2), texts, st.one_of(st.none(), st.integers(0, 30)))
edits = st.lists(
    st.tuples(
        st.sampled_from(["append", "replace", "delete", "truncate", "copy", "edit"]),
        st.integers(0, 99),
        messages,
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(start=st.lists(messages, max_size=15), script=edits)
def test_incremental_equals_fresh(
    start: list[BaseMessage], script: list[tuple[str, int, BaseMessage]]
) -> None:
    counter = TokenCounter("estimate", estimate_tokens)
    history = list(start)
    for op, index, message in [("noop", 0, None), *script]:
        if op == "append":
            history = [*history, message]
        elif op == "replace" and history:
            history = list(history)
            history[index % len(history)] = message
        elif op == "delete" and history:
            history = list(history)
            del history[index % len(history)]
        elif op == "truncate":
            history = history[: index % (len(history) + 1)]
        elif op == "copy":
            history = [m.model_copy(deep=True) for m in history]
        elif op == "edit" and history:  # a copy (a new decode) with one message edited
            history = [m.model_copy(deep=True) for m in history]
            at = index % len(history)
            history[at] = message.model_copy(update={"id": history[at].id})
        fresh = TokenCounter("estimate", estimate_tokens)
        assert counter.count_messages(history, anchor=False) == fresh.count_messages(
            history, anchor=False
        )
        assert counter.count_messages(history) == sum(map(fresh.count_message, history))
