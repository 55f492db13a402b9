"""The injection corpus over HTTP: `foldwise serve` with ChatOpenAI on the OpenAI stub.

The full form's end-to-end pass. The served agent is the default one (no extra tools), so the
paths are those a client reaches over HTTP: user messages (and "Remember that ..." for memory
extraction), the summary (the stub, asked to summarize, echoes every payload of the batch raw)
and facts stored through `POST /memory/facts`, recalled in a new thread. Every request the stub
received is checked exactly as in-process (`check_request` on `stub_messages`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from foldwise.bench._openai_stub import OpenAIStub
from foldwise.bench._rel_injection_checks import check_request, delivered, view_of
from foldwise.bench._rel_injection_corpus import Payload
from foldwise.bench._rel_serve import served, stub_messages
from foldwise.bench._reliability import Finding
from foldwise.bench._serve import stub_model_entry
from foldwise.durable import AUTHORITY_CONTRACT

__all__ = ["SERVED_PATHS", "served_campaign"]

SERVED_PATHS = ("user", "summary", "memory-route", "memory-extraction")
_FILLER = " ".join(["filler"] * 500)


class _Brain:
    def __init__(self) -> None:
        self.batch: list[Payload] = []

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        first = str(messages[0].get("content")) if messages else ""
        if "<new_messages>" in first:
            echoed = "\n".join(f"- {p.text}" for p in self.batch)
            return f"## Session intent\nrun the injection campaign\n## Notes\n{echoed}"
        return f"ok. {_FILLER}"


async def _drive(
    client: httpx.AsyncClient,
    brain: _Brain,
    batches: Sequence[list[Payload]],
    findings: list[Finding],
) -> None:
    async def post(case: str, user: str, path: str, body: Any) -> httpx.Response:
        answer = await client.post(path, json=body, headers={"x-api-key": f"key-{user}"})
        if answer.status_code >= 500 or "Traceback" in answer.text:
            findings.append(Finding(case, "no-5xx", f"{path} -> {answer.status_code}"))
        return answer

    async def turn(case: str, user: str, thread: str, text: str) -> None:
        message = {"messages": [{"role": "user", "content": text}]}
        body = {"assistant_id": "agent", "input": message}
        answer = await post(case, user, f"/threads/{thread}/runs/wait", body)
        if answer.status_code != 200:
            findings.append(Finding(case, "run", f"run -> {answer.status_code}"))

    for number, batch in enumerate(batches):
        brain.batch = batch
        case, user = f"served batch {number}", f"s{number}"
        for p in batch:
            await post(case, user, "/memory/facts", {"text": p.text})
        thread = (await post(case, user, "/threads", {})).json()["thread_id"]
        carried = " ".join(f"Remember that {p.text}\n" for p in batch)
        await turn(case, user, thread, f"[inj served b{number} t0] {carried}")
        await turn(case, user, thread, f"[inj served b{number} t1] next")
        keep = {"keep": {"type": "messages", "value": 1}}
        compacted = await post(case, user, f"/threads/{thread}/compact", keep)
        if compacted.status_code != 200 or not compacted.json().get("compacted"):
            findings.append(Finding(case, "compaction", f"not compacted: {compacted.text[:120]}"))
        await turn(case, user, thread, f"[inj served b{number} final] now?")
        for _ in range(100):  # the server's memory worker applies the extraction
            queue = await client.get("/memory/queue", headers={"x-api-key": f"key-{user}"})
            counts = queue.json().get("counts", {}) if queue.status_code == 200 else {}
            if not any(counts.get(k) for k in ("pending", "claimed", "running")):
                break
            await asyncio.sleep(0.1)
        thread = (await post(case, user, "/threads", {})).json()["thread_id"]
        words = " ".join(p.text[:60] for p in batch)
        await turn(case, user, thread, f"[inj recall b{number}] {words}")


def served_campaign(
    workdir: Path, batches: Sequence[list[Payload]]
) -> tuple[int, int, list[Finding], dict[str, set[str]]]:
    """Run the batches against `foldwise serve`; return cases, requests, findings, coverage."""
    brain = _Brain()
    findings: list[Finding] = []
    reached: dict[str, set[str]] = {}
    requests = 0
    users = [f"s{n}" for n in range(len(batches))]
    with OpenAIStub(brain) as stub:
        data = {
            "models": [stub_model_entry(stub.url)],
            "storage": {"url": f"sqlite:///{workdir / 'gateway.db'}"},
            "offload": {"root": str(workdir / "artifacts")},
            "gateway": {"auth": {"api_keys": [{"key": f"key-{u}", "user": u} for u in users]}},
            "memory": {"enabled": True, "debounce_seconds": 0.0},
            "summarization": {
                "trigger": {"type": "messages", "value": 400},
                "keep": {"type": "messages", "value": 1},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "none"},
            },
        }
        with served(data, workdir / "serve") as url:

            async def go() -> None:
                async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                    await _drive(client, brain, batches, findings)

            started = len(stub.requests)
            asyncio.run(go())
            bodies = list(stub.requests[started:])
    every = [(p.id, p.text) for batch in batches for p in batch]
    for body in bodies:
        requests += 1
        messages = stub_messages(body)
        findings += check_request(
            f"served request {requests}", messages, every, trusted_systems=[AUTHORITY_CONTRACT]
        )
        for channel, ids in delivered(view_of(messages), every).items():
            reached.setdefault(channel, set()).update(ids)
    return len(every) * len(SERVED_PATHS), requests, findings, reached
