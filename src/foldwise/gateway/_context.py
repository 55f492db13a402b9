"""`GET /threads/{id}/context`: what the next model request of a thread would cost, and why.

The request is measured the way the summarization trigger measures it, with the agent's own
token counter: the system prompt, the tool schemas, the durable context block (authority
contract plus the escaped data message holding the summary, delegations, skills and artifact
references, rendered by `foldwise.durable`), and the messages. The answer also gives the window,
the budget ceiling, the resolved trigger thresholds and whether the next call would compact.

The route is read-only: it measures with a fork of the agent's counter (`TokenCounter.fork`), so
no usage anchor, cache entry or conversation snapshot it produces is seen by later runs, and
the counting and planning (CPU work proportional to the thread) run in a worker thread, off the
event loop.

`durable` gives the exact texts the model receives for the current state, rendered by
`foldwise.durable` with the agent's own channels: the authority contract (a system part) and
the escaped data message, with the channels that have a section, and `recall`: the escaped
data message of long-term memory recalled for the latest user message (state
`memory_context.recall`), which the model receives right after that message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from foldwise.compaction import CompactionPolicy, decide_compaction
from foldwise.durable import (
    AUTHORITY_CONTRACT,
    BUILTIN_CHANNELS,
    inject_durable_context,
    inject_recall,
    is_durable_data_message,
    place_recall,
    render_sections,
)
from foldwise.gateway._agents import HostedAgent
from foldwise.gateway._deps import GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._serde import JSONResponse
from foldwise.tokens import get_counter

__all__ = ["context_report", "durable_texts", "router"]

router = APIRouter(tags=["context"])


def _durable_sections(
    hosted: HostedAgent, values: Mapping[str, Any]
) -> tuple[list[str], list[str], bool, str]:
    """The channels with a section, the sections, whether the contract is merged, the recall.

    As the agent's `DurableContextMiddleware` renders them: its channels (built-in and the
    application's), each through `render_sections`, and memory recalled for the latest user
    message placed by `place_recall` (its own message, or the block's only section).
    """
    middleware = hosted.summarization
    durable = middleware.durable if middleware is not None else None
    channels = durable.channels if durable is not None else BUILTIN_CHANNELS
    names: list[str] = []
    sections: list[str] = []
    for channel in channels:
        rendered = render_sections(values, (channel,))
        if rendered:
            names.append(channel.key)
            sections += rendered
    placed, recall = place_recall(sections, values.get("memory_context"))
    if len(placed) > len(sections):
        names.append("memory_recall")
    merged = durable.merge_contract if durable is not None else False
    return names, placed, merged, recall


def _recall_message(recall: str) -> BaseMessage | None:
    """The recall data message the model receives after the latest user message, if any."""
    placed = inject_recall([HumanMessage("")], recall)
    return placed[-1] if len(placed) > 1 else None


def durable_texts(hosted: HostedAgent, values: Mapping[str, Any]) -> dict[str, Any]:
    """The durable block of the next request: `{contract, data, sections}` (texts or null).

    Rendered with `inject_durable_context` as the agent renders it. With `merge_contract` the
    contract is the part appended to the system message.
    """
    names, sections, merged, recall = _durable_sections(hosted, values)
    block, system = inject_durable_context([], sections, merge_contract=merged)
    data = next((str(m.content) for m in block if is_durable_data_message(m)), None)
    contract = next((str(m.content) for m in block if isinstance(m, SystemMessage)), None)
    if merged and system is not None:
        contract = AUTHORITY_CONTRACT
    recalled = _recall_message(recall) if sections else None
    if recalled is not None:
        names.append("memory_recall")
    return {
        "contract": contract,
        "data": data,
        "recall": str(recalled.content) if recalled is not None else None,
        "sections": names,
    }


def context_report(hosted: HostedAgent, values: Mapping[str, Any]) -> dict[str, Any]:
    """Measure the next request of a thread whose state is `values`.

    Blocking (CPU-bound): call it from a worker thread in async code. It changes nothing that
    other callers see: counting uses a fork of the agent's counter.
    """
    middleware = hosted.summarization
    counter = (middleware.counter if middleware is not None else get_counter()).fork()
    messages: list[BaseMessage] = [
        m for m in values.get("messages") or [] if isinstance(m, BaseMessage)
    ]
    summary = values.get("summary_text") if isinstance(values.get("summary_text"), str) else None
    system = (
        counter.count_message(SystemMessage(hosted.system_prompt)) if hosted.system_prompt else 0
    )
    tools = counter.count_tools(hosted.bound_tools())
    _names, sections, _merged, recall = _durable_sections(hosted, values)
    block, _system = inject_durable_context([], sections)
    recalled = _recall_message(recall) if sections else None
    durable = sum(counter.count_message(m) for m in block)
    if recalled is not None:
        durable += counter.count_message(recalled)
    summary_tokens = counter.count_text(summary) if summary else 0
    message_tokens = counter.count_messages(messages, anchor=False)
    static = system + tools + durable
    request = counter.count_request(messages, static_tokens=static)
    report: dict[str, Any] = {
        "summary_text": summary,
        "durable": durable_texts(hosted, values),
        "counter": counter.name,
        "model_name": middleware.run_model_name if middleware is not None else None,
        "message_count": len(messages),
        "tokens": {
            "system": system,
            "tools": tools,
            "durable_context": durable,
            "summary": summary_tokens,
            "messages": message_tokens,
            "total": request.total,
            "estimated_total": static + message_tokens,
            "anchored": request.anchored,
        },
        "window": None,
        "budget_limit": None,
        "reserved_output_tokens": None,
        "fraction_of_window": None,
        "compaction_enabled": middleware is not None and middleware.enabled,
        "triggers": [],
        "keep": None,
        "next_call": None,
    }
    if middleware is None:
        return report
    policy = middleware.policy
    report.update(_policy_report(policy, request.total))
    if middleware.enabled:
        # The summary is counted by the planner itself; the durable block minus it is static.
        decision = decide_compaction(
            messages,
            policy=policy,
            summary_text=summary,
            counter=counter,
            static_tokens=max(0, static - summary_tokens),
        )
        plan = decision.plan
        report["next_call"] = {
            "compacts": plan is not None,
            "trigger": plan.trigger if plan is not None else None,
            "reason": plan.reason if plan is not None else None,
            "skip_reason": decision.skip_reason.value if decision.skip_reason else None,
            "detail": decision.detail,
            "tokens": decision.tokens_before,
        }
    return report


def _policy_report(policy: CompactionPolicy, total: int) -> dict[str, Any]:
    """The window, budget, thresholds and retention the next call is judged by."""
    window = policy.context_window
    return {
        "window": window,
        "budget_limit": policy.budget_limit,
        "reserved_output_tokens": policy.reserved_output_tokens,
        "fraction_of_window": round(total / window, 4) if window else None,
        "triggers": [
            {
                "type": t.kind,
                "value": t.source.value,
                "limit": t.limit,
                "description": t.describe(),
            }
            for t in policy.triggers
        ],
        "dropped_triggers": [c.model_dump() for c in policy.dropped_clauses],
        "keep": policy.keep.model_dump(),
        "min_gain_tokens": policy.min_gain_tokens,
    }


@router.get("/threads/{thread_id}/context")
async def get_context(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    model_name: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    assistant_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
) -> Response:
    """Token usage of the thread's next request, split by part, with window and thresholds."""
    record = await require_thread(gateway, thread_id, identity)
    hosted = gateway.agent_for(record, assistant_id=assistant_id, model_name=model_name)
    snapshot = await hosted.graph.aget_state({"configurable": {"thread_id": thread_id}})
    report = await asyncio.to_thread(context_report, hosted, snapshot.values or {})
    return JSONResponse({"thread_id": thread_id, **report})
