"""Reliability area `injection`: the corpus through every untrusted path, compaction forced.

The committed corpus (`corpus/injection.jsonl`, ≥ 300 payloads, English and Chinese) is cut
into batches; each batch goes through each path on its own thread of the real gateway
(in-process, SQLite, memory on), with a scripted model that records every request:

- `user`: the payloads in user messages;
- `tool`: one small tool output per payload;
- `offload`: one large tool output per payload, stored by the offload middleware (the preview
  in the conversation, the artifact reference in the data block after compaction);
- `delegation`: a `task` call per payload whose structured result brief is the payload;
- `skill`: a `SKILL.md` read per payload whose description is the payload;
- `summary`: the summarizer echoes every payload of the batch, raw (on every path);
- `memory-route`: the payloads stored as facts through `POST /memory/facts`, then recalled;
- `memory-extraction`: "Remember that <payload>" in a thread, extracted by the memory worker,
  then recalled in a new thread.

The short form runs every path at once per batch: one identity per batch stores the payloads as
facts, then one thread carries them in the user message ("Remember that ..."), and the model
calls all four tools once per payload in the same turn; a second turn, a forced compaction
(`POST /threads/{id}/compact`, keep 1) and a last turn follow, so the data block carries what
compaction removed; the memory worker is flushed and a new thread of the same identity runs
twice (recall). The full form also runs each path on its own threads, three times with
reshuffled batches. Every recorded request is checked
(`_rel_injection_checks.check_request`): 0 untrusted bytes in system messages, 0 framing
breaks, look-alike brackets and zero-width/bidi controls neutralised in the data block. A case
is one payload through one path; the row notes how many payloads reached a data block.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from foldwise.bench._rel_injection_agent import SYSTEM_PROMPT, InjectionScript, injection_factory
from foldwise.bench._rel_injection_checks import check_request, delivered, view_of
from foldwise.bench._rel_injection_corpus import Payload, load_corpus
from foldwise.bench._rel_injection_serve import SERVED_PATHS, served_campaign
from foldwise.bench._rel_inproc import INPROC_URL, gateway_config, headers_for
from foldwise.bench._reliability import AreaOptions, AreaResult, Finding, area_command
from foldwise.bench._serve import open_app
from foldwise.config import FoldwiseConfig
from foldwise.durable import AUTHORITY_CONTRACT

__all__ = ["PATHS", "run"]

PATHS = (
    "user",
    "tool",
    "offload",
    "delegation",
    "skill",
    "summary",
    "memory-route",
    "memory-extraction",
)
BATCH = 60
TRUSTED_SYSTEMS = (
    SYSTEM_PROMPT,
    AUTHORITY_CONTRACT,
    f"{SYSTEM_PROMPT}\n\n{AUTHORITY_CONTRACT}",
)


@dataclass
class _Tally:
    cases: int = 0
    requests: int = 0
    findings: list[Finding] = field(default_factory=list)
    delivered: dict[str, set[str]] = field(default_factory=dict)
    quarantined: int = 0
    facts: int = 0


def _batches(payloads: Sequence[Payload], seed: int) -> list[list[Payload]]:
    order = list(payloads)
    random.Random(seed).shuffle(order)
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


async def _post(
    client: httpx.AsyncClient, tally: _Tally, case: str, path: str, user: str, body: object
) -> httpx.Response:
    answer = await client.post(path, json=body, headers=headers_for(user))
    if answer.status_code >= 500 or "Traceback" in answer.text:
        tally.findings.append(Finding(case, "no-5xx", f"{path} -> {answer.status_code}"))
    return answer


async def _turn(
    client: httpx.AsyncClient, tally: _Tally, case: str, user: str, thread: str, text: str
) -> None:
    body = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}}
    answer = await _post(client, tally, case, f"/threads/{thread}/runs/wait", user, body)
    if answer.status_code != 200:
        tally.findings.append(Finding(case, "run", f"run -> {answer.status_code}"))


async def _thread(client: httpx.AsyncClient, tally: _Tally, case: str, user: str) -> str:
    answer = await _post(client, tally, case, "/threads", user, {})
    return str(answer.json()["thread_id"])


async def _compact(
    client: httpx.AsyncClient, tally: _Tally, case: str, user: str, thread: str
) -> None:
    keep = {"keep": {"type": "messages", "value": 1}}
    answer = await _post(client, tally, case, f"/threads/{thread}/compact", user, keep)
    if answer.status_code != 200 or not answer.json().get("compacted"):
        tally.findings.append(Finding(case, "compaction", f"not compacted: {answer.text[:120]}"))


async def _conversation(
    client: httpx.AsyncClient,
    script: InjectionScript,
    tally: _Tally,
    path: str,
    number: int,
    batch: list[Payload],
) -> None:
    """One thread: the batch through `path` (`all`: every path at once), compacted."""
    case, user = f"{path} batch {number}", f"u{path}{number}".replace("-", "")
    if path in ("all", "memory-route"):
        for p in batch:
            made = await _post(client, tally, case, "/memory/facts", user, {"text": p.text})
            tally.facts += made.status_code == 201
            tally.quarantined += made.status_code == 201 and made.json()["status"] != "active"
    if path != "memory-route":
        thread = await _thread(client, tally, case, user)
        script.turn[f"{path} b{number} t0"] = batch
        if path in ("all", "user", "memory-extraction"):
            carried = " ".join(f"Remember that {p.text}\n" for p in batch)
        else:
            carried = "go on"
        await _turn(client, tally, case, user, thread, f"[inj {path} b{number} t0] {carried}")
        await _turn(client, tally, case, user, thread, f"[inj {path} b{number} t1] next")
        await _compact(client, tally, case, user, thread)
        await _turn(client, tally, case, user, thread, f"[inj {path} b{number} final] now?")
    if path in ("all", "memory-route", "memory-extraction"):
        worker = client.app_state.agents.memory_worker  # type: ignore[attr-defined]
        await worker.aflush(timeout=60)
        thread = await _thread(client, tally, case, user)
        words = " ".join(p.text[:60] for p in batch)
        await _turn(client, tally, case, user, thread, f"[inj recall b{number}] {words}")
        await _turn(client, tally, case, user, thread, f"[inj recall b{number}] and then?")


def _config(workdir: Path, users: list[str]) -> FoldwiseConfig:
    return gateway_config(
        workdir,
        users,
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 400},
                "keep": {"type": "messages", "value": 1},
                "min_gain_tokens": 0,
                # Users' words flow into the summary too (the worst case for the summary path).
                "preserve_human": {"mode": "none"},
            },
            "offload": {"tool_token_limit": 1000, "preview_chars": 200},
            "memory": {"enabled": True, "debounce_seconds": 0.0},
        },
    )


async def _campaign(
    workdir: Path, payloads: list[Payload], seed: int, paths: Sequence[str]
) -> dict[str, _Tally]:
    batches = _batches(payloads, seed)
    users = [f"u{path}{n}".replace("-", "") for path in paths for n in range(len(batches))]
    script = InjectionScript()
    factory, model = injection_factory(script)
    tallies = {path: _Tally() for path in paths}
    config = _config(workdir, users)
    async with open_app(config, factory, base_url=INPROC_URL, client_timeout=120) as (client, app):
        client.app_state = app.state.gateway  # type: ignore[attr-defined]
        for path in paths:
            tally = tallies[path]
            for number, batch in enumerate(batches):
                script.batch, script.turn = batch, {}
                start = len(model.requests)
                await _conversation(client, script, tally, path, number, batch)
                pairs = [(p.id, p.text) for p in batch]
                tally.cases += len(batch) * (len(PATHS) if path == "all" else 1)
                for request in model.requests[start:]:
                    tally.requests += 1
                    case = f"{path} batch {number} request {tally.requests}"
                    tally.findings += check_request(
                        case, request.messages, pairs, trusted_systems=TRUSTED_SYSTEMS
                    )
                    for channel, ids in delivered(view_of(request.messages), pairs).items():
                        tally.delivered.setdefault(channel, set()).update(ids)
    return tallies


def _row(
    name: str,
    tallies: list[dict[str, _Tally]],
    options: AreaOptions,
    started: float,
    payloads: int,
    *extra: str,
) -> AreaResult:
    every = [t for found in tallies for t in found.values()]
    reached: dict[str, set[str]] = {}
    for tally in every:
        for channel, ids in tally.delivered.items():
            reached.setdefault(channel, set()).update(ids)
    facts, held = sum(t.facts for t in every), sum(t.quarantined for t in every)
    notes = [
        f"{payloads} payloads through {len(PATHS)} paths ({', '.join(PATHS)}); "
        f"{sum(t.requests for t in every):,} model requests checked",
        "payloads seen escaped per data-block section: "
        + ", ".join(f"{c} {len(ids)}" for c, ids in sorted(reached.items())),
        f"facts stored through /memory/facts: {facts}, of which quarantined: {held}",
    ]
    return AreaResult(
        area=name,
        cases=sum(t.cases for t in every),
        violations=[f for t in every for f in t.findings],
        command=area_command("injection", options, *extra),
        seconds=time.perf_counter() - started,
        notes=notes,
    )


def run(options: AreaOptions) -> list[AreaResult]:
    """The corpus through every path; the full form adds separate paths and repetitions."""
    payloads = load_corpus()
    started = time.perf_counter()
    workdir = options.workdir / "combined"
    workdir.mkdir(parents=True, exist_ok=True)
    found = asyncio.run(_campaign(workdir, payloads, options.seed, ["all"]))
    rows = [_row("injection corpus, every path at once", [found], options, started, len(payloads))]
    if options.full:
        started = time.perf_counter()
        runs = []
        for rep in range(3):
            workdir = options.workdir / f"separate-{rep}"
            workdir.mkdir(parents=True, exist_ok=True)
            runs.append(asyncio.run(_campaign(workdir, payloads, options.seed + rep, PATHS)))
        rows.append(
            _row(
                "injection corpus, one path at a time, 3 runs",
                runs,
                options,
                started,
                len(payloads),
            )
        )
        rows.append(_served_row(options, payloads))
    return rows


def _served_row(options: AreaOptions, payloads: list[Payload]) -> AreaResult:
    started = time.perf_counter()
    workdir = options.workdir / "served"
    workdir.mkdir(parents=True, exist_ok=True)
    cases, requests, findings, reached = served_campaign(workdir, _batches(payloads, options.seed))
    notes = [
        f"{len(payloads)} payloads through {', '.join(SERVED_PATHS)} over HTTP; "
        f"{requests:,} model requests checked (as the OpenAI stub received them)",
        "payloads seen escaped per data-block section: "
        + ", ".join(f"{c} {len(ids)}" for c, ids in sorted(reached.items())),
    ]
    return AreaResult(
        area="injection corpus, foldwise serve over HTTP",
        cases=cases,
        violations=findings,
        command=area_command("injection", options),
        seconds=time.perf_counter() - started,
        notes=notes,
    )
