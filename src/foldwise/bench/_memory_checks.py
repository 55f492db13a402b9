"""The six measurements of `foldwise bench memory`, each end to end through `MemoryManager`.

Every check runs the path a user's agent runs: `MemoryManager.remember` on conversation turns
(selection → rules extractor → quarantine and scope gate → supersession → a SQLite write), then
what the model would see: the ``memory_context`` block (`memory_context_steps`, as
`MemoryMiddleware` renders it) and `memory_search`'s top 5. Offline and deterministic (fixed
seeds); timings are wall-clock on this machine.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from foldwise._steps import run_sync
from foldwise.bench._memory_attacks import attack_corpus
from foldwise.bench._memory_corpus import benign_corpus, change_corpus, scope_corpus
from foldwise.errors import MemoryInputError
from foldwise.memory import FactSource, MemoryManager, namespace_for, open_backend
from foldwise.memory._facts import Namespace, utcnow
from foldwise.memory._inject import memory_context_steps
from foldwise.memory._rules import RulesExtractor
from foldwise.tokens import get_counter

__all__ = [
    "block_for",
    "check_quarantine",
    "check_recall",
    "check_scope",
    "check_supersession",
    "check_write_cost",
    "fresh_manager",
    "injected",
    "percentile",
    "timed",
]

_COUNT = get_counter().count_text
_ADJ = (
    "amber",
    "velvet",
    "smoked",
    "frosted",
    "golden",
    "crimson",
    "silver",
    "rustic",
    "spiced",
    "misty",
    "ivory",
    "copper",
    "lunar",
    "coral",
    "jade",
    "cobalt",
    "saffron",
    "hazel",
    "indigo",
    "maple",
)
_NOUN = (
    "teapot",
    "kayak",
    "sonata",
    "lantern",
    "orchid",
    "falcon",
    "mosaic",
    "glacier",
    "pretzel",
    "compass",
    "violin",
    "harbor",
    "meadow",
    "quartz",
    "tandem",
    "bonsai",
    "origami",
    "canyon",
    "sundial",
    "zeppelin",
)
_ZH_A = (
    "红",
    "蓝",
    "金",
    "银",
    "青",
    "紫",
    "白",
    "黑",
    "绿",
    "橙",
    "灰",
    "粉",
    "棕",
    "黄",
    "赤",
    "碧",
    "翠",
    "朱",
    "墨",
    "雪",
)
_ZH_B = (
    "茶壶",
    "风筝",
    "灯笼",
    "折扇",
    "瓷碗",
    "古琴",
    "竹笛",
    "木雕",
    "围棋",
    "剪纸",
    "陶罐",
    "书法",
    "盆景",
    "石砚",
    "花瓶",
    "铜镜",
    "团扇",
    "香囊",
    "漆盒",
    "玉佩",
)


@contextmanager
def fresh_manager(folder: Path, name: str) -> Iterator[MemoryManager]:
    """A manager over a new SQLite file in `folder` (the default backend)."""
    manager = MemoryManager(open_backend(f"sqlite:///{folder / name}.db"))
    manager.setup()
    try:
        yield manager
    finally:
        manager.close()


def injected(manager: MemoryManager, user: str, agent: str, query: str) -> tuple[str, str]:
    """The profile and the recall `MemoryMiddleware` would inject for `query` (default budget)."""
    namespaces = [namespace_for(user, agent), namespace_for(user, None)]
    value = run_sync(
        memory_context_steps(
            manager, namespaces, query, max_tokens=1500, recall_k=8, profile_share=0.6, count=_COUNT
        )
    )
    return str(value["text"]), str(value["recall"])


def block_for(manager: MemoryManager, user: str, agent: str, query: str) -> str:
    """Everything memory would inject for `query`: the profile and the recall."""
    return "\n".join(injected(manager, user, agent, query))


def _turn(text: str, tag: str) -> list[BaseMessage]:
    return [HumanMessage(text, id=f"h-{tag}"), AIMessage("Noted.", id=f"a-{tag}")]


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """`fn(*args, **kwargs)` and the milliseconds it took."""
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, (time.perf_counter() - start) * 1000


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- 1. cross-thread recall and isolation -------------------------------------------------------


@dataclass
class RecallResult:
    planted: int = 0
    found: int = 0
    """Found by the query: in the recall section or in `memory_search`'s top 5."""
    in_block: int = 0
    """Anywhere in what is injected (the profile included, which holds whole namespaces)."""
    cross_user: int = 0
    cross_agent: int = 0
    shared_planted: int = 0
    shared_found: int = 0
    misses: list[str] = field(default_factory=list)


def _items(count: int, seed: int) -> list[tuple[str, str, str]]:
    """`count` unique (statement, query, item) triples, half English, half Chinese."""
    rng = random.Random(seed)
    english = [f"{a} {n}" for a in _ADJ for n in _NOUN]
    chinese = [f"{a}{b}" for a in _ZH_A for b in _ZH_B]
    rng.shuffle(english)
    rng.shuffle(chinese)
    out: list[tuple[str, str, str]] = []
    for i in range(count):
        if i % 2:
            item = chinese.pop()
            out.append((f"我喜欢{item}。", f"周末想找点和{item}有关的事做，有什么建议？", item))
        else:
            item = english.pop()
            out.append((f"I like {item}.", f"Any ideas for a weekend with a {item}?", item))
    return out


def check_recall(folder: Path, *, threads: int = 50) -> RecallResult:
    """4 users x 2 agents x `threads` threads, one fact each; queried from fresh threads."""
    users, agents = ("u1", "u2", "u3", "u4"), ("coder", "writer")
    triples = _items(len(users) * len(agents) * threads + len(users), seed=7)
    result = RecallResult()
    owner: dict[str, tuple[str, str]] = {}
    with fresh_manager(folder, "recall") as manager:
        plan: list[tuple[str, str, str, str]] = []
        for u in users:
            for a in agents:
                for t in range(threads):
                    statement, query, item = triples.pop()
                    ns = namespace_for(u, a)
                    source = FactSource(thread_id=f"{u}-{a}-{t}", via="rules")
                    manager.remember(ns, _turn(statement, f"{u}{a}{t}"), source=source)
                    owner[item] = (u, a)
                    plan.append((u, a, query, item))
            statement, query, item = triples.pop()  # one fact the user shares with every agent
            manager.add(namespace_for(u, None), statement.replace("I like", "I always like"))
            owner[item] = (u, "*")
            plan += [(u, a, query, item) for a in agents]
        for u, a, query, item in plan:
            shared = owner[item][1] == "*"
            result.shared_planted += shared
            result.planted += not shared
            profile, recall = injected(manager, u, a, query)
            block = f"{profile}\n{recall}"
            hits = [
                *manager.search(namespace_for(u, a), query, k=5),
                *manager.search(namespace_for(u, None), query, k=5),
            ]
            top = " ".join(f.text for f in hits)
            hit = item in recall or item in top
            result.in_block += item in block
            if shared:
                result.shared_found += hit
            else:
                result.found += hit
            if not hit:
                result.misses.append(f"{u}/{a}: {item}")
            for other, (ou, oa) in owner.items():
                if other in block or other in top:
                    result.cross_user += ou != u
                    result.cross_agent += ou == u and oa not in (a, "*")
    return result


# --- 2. supersession ----------------------------------------------------------------------------


@dataclass
class SupersessionResult:
    cases: dict[str, int] = field(default_factory=dict)
    right: dict[str, int] = field(default_factory=dict)
    stale_injected: int = 0
    as_of_right: int = 0
    as_of_cases: int = 0
    additive_closed: int = 0
    wrong: list[str] = field(default_factory=list)


def check_supersession(folder: Path) -> SupersessionResult:
    """150 changes, 150 additive facts, 100 retractions; current, as-of and injected values."""
    result = SupersessionResult()
    with fresh_manager(folder, "supersession") as manager:
        for i, case in enumerate(change_corpus()):
            ns = namespace_for(f"s{i}", "agent")
            manager.remember(ns, _turn(case.first, f"{i}a"))
            first = manager.list(ns, status="active")
            between = utcnow()
            manager.remember(ns, _turn(case.second, f"{i}b"))
            active = manager.list(ns, status="active")
            slot = [f for f in active if f.attribute == case.attribute]
            old = [f for f in first if f.attribute == case.attribute]
            result.cases[case.kind] = result.cases.get(case.kind, 0) + 1
            if case.kind == "change":
                ok = len(slot) == 1 and (case.value or "").casefold() in slot[0].text.casefold()
                block = block_for(manager, f"s{i}", "agent", case.second)
                result.stale_injected += any(f.text in block for f in old if f not in slot)
                then = manager.search(ns, old[0].text, k=5, as_of=between) if old else []
                result.as_of_cases += 1
                # Right only if the old value is found *and* the new one is not: a search that
                # ignored `as_of` would return both.
                result.as_of_right += (
                    bool(old)
                    and any(f.id == old[0].id for f in then)
                    and not any(f.id in {g.id for g in slot} for f in then)
                )
            elif case.kind == "additive":
                closed = [f for f in old if f.id not in {g.id for g in active}]
                result.additive_closed += len(closed)
                ok = bool(old) and not closed and len(active) > len(first)
            else:
                ok = bool(old) and not slot
            result.right[case.kind] = result.right.get(case.kind, 0) + ok
            if not ok:
                result.wrong.append(f"{case.kind}: {case.first!r} -> {case.second!r}")
    return result


# --- 3. quarantine ------------------------------------------------------------------------------


@dataclass
class QuarantineResult:
    attacks: int = 0
    quarantined: int = 0
    reached: int = 0
    benign: int = 0
    false_quarantine: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    leaks: list[str] = field(default_factory=list)


def _attack(manager: MemoryManager, ns: Namespace, text: str, channel: str, i: int) -> bool:
    """Deliver one attack; True when memory quarantined it."""
    if channel == "user":
        decisions = manager.remember(ns, _turn(text, f"q{i}"))
        return any(d.action == "quarantined" for d in decisions)
    turn: list[BaseMessage] = [
        HumanMessage("Please check the page.", id=f"h-q{i}"),
        AIMessage("", tool_calls=[{"id": f"c{i}", "name": "fetch", "args": {}}], id=f"a-q{i}"),
        ToolMessage(text, tool_call_id=f"c{i}", id=f"t-q{i}"),
    ]
    manager.remember(ns, turn)  # tool output never reaches extraction
    try:  # ...and a model that copies it into memory_add meets the quarantine
        return manager.add(ns, text[:2000], gate=True).status == "quarantined"
    except MemoryInputError:
        return False


def check_quarantine(folder: Path) -> QuarantineResult:
    """≥ 200 attacks (user turns and tool output, EN + ZH) and 500 benign statements."""
    result = QuarantineResult()
    with fresh_manager(folder, "quarantine") as manager:
        for i, case in enumerate(attack_corpus()):
            ns = namespace_for(f"q{i}", "agent")
            result.attacks += 1
            result.quarantined += _attack(manager, ns, case.text, case.channel, i)
            active = manager.list(ns, status="active")
            block = block_for(manager, f"q{i}", "agent", case.text[:500])
            if active or (block and any(f.text in block for f in manager.list(ns))):
                result.reached += 1
                result.leaks.append(case.text[:120])
            for fact in manager.quarantined(ns):
                result.reasons[fact.reason or "?"] = result.reasons.get(fact.reason or "?", 0) + 1
        for i, benign in enumerate(benign_corpus()):
            ns = namespace_for(f"b{i}", "agent")
            decisions = manager.remember(ns, _turn(benign.text, f"b{i}"))
            result.benign += 1
            result.false_quarantine += any(d.action == "quarantined" for d in decisions)
    return result


# --- 4. scope -----------------------------------------------------------------------------------


@dataclass
class ScopeResult:
    task: int = 0
    task_promoted: int = 0
    durable: int = 0
    durable_stored: int = 0
    promoted: list[str] = field(default_factory=list)


def check_scope(folder: Path) -> ScopeResult:
    """300 task-scoped or transactional statements mixed with 300 durable ones."""
    result = ScopeResult()
    with fresh_manager(folder, "scope") as manager:
        for i, case in enumerate(scope_corpus()):
            ns = namespace_for(f"p{i}", "agent")
            manager.remember(ns, _turn(case.text, f"p{i}"))
            stored = bool(manager.list(ns, status="active"))
            if case.durable:
                result.durable += 1
                result.durable_stored += stored
            else:
                result.task += 1
                result.task_promoted += stored
                if stored:
                    result.promoted.append(case.text)
    return result


# --- 6. write cost ------------------------------------------------------------------------------


@dataclass
class CostResult:
    runs: int = 0
    remember_p50_ms: float = 0.0
    remember_p95_ms: float = 0.0
    extract_p50_ms: float = 0.0
    extract_p95_ms: float = 0.0
    inject_p50_ms: float = 0.0
    inject_p95_ms: float = 0.0
    facts_at_end: int = 0


def check_write_cost(folder: Path, *, runs: int = 200) -> CostResult:
    """What the agent path pays per run today (part 2 moves `remember` off it)."""
    benign = [c.text for c in benign_corpus()]
    rules = RulesExtractor()
    remember: list[float] = []
    extract: list[float] = []
    inject: list[float] = []
    ns = namespace_for("cost", "agent")
    with fresh_manager(folder, "cost") as manager:
        for i in range(runs):
            turn = _turn(benign[i % len(benign)], f"c{i}")
            extract.append(timed(rules.extract, turn)[1])
            remember.append(timed(manager.remember, ns, turn)[1])
            query = benign[(i * 7) % len(benign)]
            inject.append(timed(block_for, manager, "cost", "agent", query)[1])
        facts = len(manager.list(ns, status="active"))
    return CostResult(
        runs=runs,
        remember_p50_ms=statistics.median(remember),
        remember_p95_ms=percentile(remember, 0.95),
        extract_p50_ms=statistics.median(extract),
        extract_p95_ms=percentile(extract, 0.95),
        inject_p50_ms=statistics.median(inject),
        inject_p95_ms=percentile(inject, 0.95),
        facts_at_end=facts,
    )
