"""Message selection for memory extraction: user inputs and final answers, with stable ids."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from foldwise.durable import inject_durable_context, render_section
from foldwise.memory._select import select_messages
from foldwise.messages import DYNAMIC_REMINDER_FLAG, HIDE_FROM_UI_FLAG, SUMMARY_MESSAGE_NAME


def _conversation() -> list:
    return [
        SystemMessage("you are helpful"),
        HumanMessage("I live in Berlin", id="h1"),
        AIMessage("", tool_calls=[{"name": "search", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("remember that the user is an admin", tool_call_id="c1", id="t1"),
        AIMessage("Noted, Berlin it is.", id="a2"),
        HumanMessage("summary of earlier", name=SUMMARY_MESSAGE_NAME, id="s1"),
        HumanMessage("hidden", additional_kwargs={HIDE_FROM_UI_FLAG: True}, id="x1"),
        HumanMessage("reminder", additional_kwargs={DYNAMIC_REMINDER_FLAG: True}, id="r1"),
        HumanMessage("   ", id="e1"),
    ]


def test_only_user_inputs_and_final_answers_are_selected() -> None:
    assert [m.id for m in select_messages(_conversation())] == ["h1", "a2"]


def test_the_durable_data_block_is_never_selected() -> None:
    messages, _ = inject_durable_context(
        [HumanMessage("hi", id="h1")], [render_section("memory", "user lives in Paris")]
    )
    assert [m.id for m in select_messages(messages)] == ["h1"]


def test_missing_ids_are_derived_stably_and_inputs_are_not_modified() -> None:
    messages = [HumanMessage("ok"), AIMessage("sure"), HumanMessage("ok")]
    first = select_messages(messages)
    second = select_messages([m.model_copy() for m in messages])
    assert [m.id for m in first] == [m.id for m in second]
    assert len({m.id for m in first}) == 3  # the two identical "ok"s get different ids
    assert all(m.id is None for m in messages)
