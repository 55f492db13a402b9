"""Session `proposal_review`: a pasted 8,300-character proposal checked against the docs.

Modelled on the story of seed 001: the user pastes a long proposal and asks for a check
against the workspace documents; each retrieval returns about 47,000 characters. A policy
that summarizes the user's paste loses the proposal; the last turns need it verbatim.
"""

from __future__ import annotations

import random

from langchain_core.messages import BaseMessage

from foldwise.replay.sessions._text import SessionBuilder, fill, pick

__all__ = ["build_proposal_review", "proposal_text"]

_SYSTEM = (
    "你是星河数据平台的文档核查助手。你可以用 search_workspace 检索工作区文档（架构规范、"
    "容量基线、SLA、运维手册）。核查时逐节对照文档，给出结论和出处；不确定的地方要说明。"
)
_SECTIONS = [
    ("1", "背景", "风控平台 v1 于 2024 年上线，目前承载支付、转账和营销三条业务线的实时风控决策。"),
    ("2", "目标", "本提案的目标是在不中断业务的前提下，把平台扩容到能够支撑明年双十一的流量峰值。"),
    ("3", "现状", "现有集群部署在华东二区，由规则引擎、特征服务和决策网关三部分组成。"),
    ("4.1", "总体架构", "新架构沿用三层结构，但把特征服务拆分为在线特征和近线特征两个独立集群。"),
    (
        "4.2",
        "规则引擎",
        "规则引擎升级到 v2，规则以有向无环图的方式编排，支持灰度发布和按租户隔离。",
    ),
    ("4.3", "决策网关", "决策网关改为无状态部署，前置一层本地缓存，缓存命中时不再访问特征服务。"),
    (
        "5",
        "数据流",
        "交易请求先经过决策网关，再并行调用规则引擎和模型服务，结果汇总后写回消息队列。",
    ),
    ("6", "存储", "在线特征使用分布式键值存储，近线特征落在列式数据库，明细日志保留在对象存储。"),
    (
        "7",
        "高可用",
        "每个组件至少三副本，跨可用区部署；任何单个可用区故障时整体容量不低于百分之六十七。",
    ),
    ("8", "容量规划", "容量规划以明年大促的预测峰值为基准，并预留百分之三十的安全余量。"),
    ("9", "风险与回滚", "主要风险是新旧规则结果不一致，因此上线前需要至少两周的影子流量比对。"),
    ("10", "时间表", "整个项目分四个阶段推进，预计在明年九月底之前完成全部切换。"),
]
_DETAILS = [
    "峰值 QPS 预计为 {qps} 次每秒，P99 延迟目标为 {p99} 毫秒。",
    "{component}计划部署 {nodes} 个节点，每个节点配置 {cpu} 核 CPU 和 {mem} GB 内存。",
    "根据压测结果，单节点可以承载约 {per} 次每秒的决策请求。",
    "{component}的磁盘使用率告警阈值设为百分之 {disk}，超过后自动扩容。",
    "该部分改造需要 {weeks} 周，由 {team} 负责，{date} 前完成联调。",
    "消息队列的分区数从 {p_old} 调整为 {p_new}，保证消费端可以水平扩展。",
    "缓存的过期时间设为 {ttl} 秒，命中率目标不低于百分之 {hit}。",
    "特征回填任务每天凌晨 {hour} 点执行，单次耗时不超过 {mins} 分钟。",
]
_COMPONENTS = ["规则引擎", "在线特征服务", "近线特征服务", "决策网关", "模型服务", "消息队列"]
_TEAMS = ["风控平台组", "基础架构组", "数据平台组", "SRE 团队"]
_DOCS = ["架构规范 v3.1", "容量基线手册 v3.2", "风控平台 SLA 2025", "运维手册 第 7 版", "发布规范"]
_SUBJECTS = [
    "决策网关",
    "规则引擎",
    "在线特征服务",
    "近线特征服务",
    "模型服务",
    "消息队列",
    "对象存储",
]
_METRICS = ["峰值 QPS", "P99 延迟", "CPU 水位", "内存水位", "副本数", "磁盘使用率", "恢复时间目标"]


def _detail(rng: random.Random) -> str:
    return pick(rng, _DETAILS).format(
        qps=rng.choice([42000, 48000, 56000, 60000]),
        p99=rng.choice([35, 40, 50, 80]),
        component=pick(rng, _COMPONENTS),
        nodes=rng.randint(6, 48),
        cpu=rng.choice([16, 32, 64]),
        mem=rng.choice([64, 128, 256]),
        per=rng.choice([1200, 1500, 1800, 2400]),
        disk=rng.choice([70, 75, 80, 85]),
        weeks=rng.randint(2, 8),
        team=pick(rng, _TEAMS),
        date=f"{rng.randint(3, 9)} 月 {rng.randint(1, 28)} 日",
        p_old=rng.choice([32, 48, 64]),
        p_new=rng.choice([96, 128, 192]),
        ttl=rng.choice([30, 60, 120, 300]),
        hit=rng.choice([85, 90, 95]),
        hour=rng.randint(1, 5),
        mins=rng.choice([20, 30, 45, 60]),
    )


def proposal_text(seed: int = 1, chars: int = 8300) -> str:
    """The pasted proposal: twelve numbered sections, about `chars` characters."""
    rng = random.Random(f"proposal:{seed}")
    header = "《实时风控平台 v2 扩容提案》\n提交人：风控平台组　版本：0.9（评审稿）\n\n"
    per_section = (chars + 400 - len(header)) // len(_SECTIONS)
    parts = [header]
    for number, title, lead in _SECTIONS:
        body = [f"## {number} {title}\n", lead]
        while sum(len(p) for p in body) < per_section - 40:
            body.append(_detail(rng))
        parts.append("".join(body) + "\n\n")
    text = "".join(parts).rstrip()
    if len(text) > chars:
        text = text[: text.rfind("。", 0, chars) + 1]
    return text + "\n"


def _hit(rng: random.Random, index: int, topic: str) -> str:
    doc = pick(rng, _DOCS)
    subject = pick(rng, _SUBJECTS)
    lines = [
        f"[命中 {index + 1}] 文档：{doc} › 第 {rng.randint(1, 12)}.{rng.randint(1, 9)} 节 "
        f"{subject}（相关度 {rng.uniform(0.55, 0.97):.2f}，查询：{topic}）\n"
    ]
    for _ in range(rng.randint(4, 7)):
        metric = pick(rng, _METRICS)
        lines.append(
            f"{subject}的{metric}基线为 {rng.randint(2, 90) * 100} ，"
            f"大促期间不得超过基线的 {rng.choice([120, 130, 150])}%；"
            f"超过时由{pick(rng, _TEAMS)}在 {rng.randint(5, 30)} 分钟内响应。"
            f"{pick(rng, _SUBJECTS)}依赖{subject}，两者的容量需要按 1:{rng.randint(1, 4)} 配比。"
        )
    lines.append("\n")
    return "".join(lines)


def _search(rng: random.Random, topic: str, chars: int) -> str:
    return f"检索“{topic}”共返回 {rng.randint(40, 90)} 条结果，按相关度排序：\n" + fill(
        rng, chars, lambda r, i: _hit(r, i, topic)
    )


def _workspace(
    rng: random.Random, size: int, *searches: tuple[str, str]
) -> list[tuple[str, dict[str, object], str]]:
    """`search_workspace` calls for `(query, topic)` pairs, with their seeded results."""
    return [
        ("search_workspace", {"query": query}, _search(rng, topic, size))
        for query, topic in searches
    ]


def _gateway_and_sla(b: SessionBuilder, rng: random.Random, size: int) -> None:
    """Sections 4 and 7 checked against the architecture rules and the SLA."""
    b.tool_round(
        "我先检索架构规范和容量基线，分别对应提案第 4 节和第 8 节。",
        _workspace(
            rng,
            size,
            ("风控平台 架构规范 决策网关 无状态", "架构规范 决策网关"),
            ("容量基线 峰值 QPS 安全余量", "容量基线 峰值 QPS"),
        ),
    )
    b.say(
        "## 第4.3节 决策网关核查结论\n- 提案写“"
        "缓存命中时不再访问特征服务”，架构规范要求命中时仍需"
        "异步刷新特征，存在不一致。\n- 无状态部署与规范一致。\n接下来核对 SLA 和高可用要求。"
    )
    b.tool_round(
        "检索 SLA 与运维手册中关于跨可用区容量的要求。",
        _workspace(rng, size, ("SLA 可用区 故障 容量 百分之六十七", "SLA 可用区故障")),
    )
    b.say(
        "## 第7节 高可用核查结论\n- 提案要求单可用区故障时容量不低于 67%，SLA 2025 要求不低于 "
        "75%，提案偏低，属于🔴一级问题。\n接下来核对第 8 节的容量规划数字。"
    )


def _capacity(b: SessionBuilder, rng: random.Random, size: int) -> None:
    """Section 8 recomputed from the capacity baselines; the first (too short) report."""
    b.tool_round(
        "检索容量基线手册中各组件的单节点能力，用来复算第 8 节。",
        _workspace(
            rng,
            size,
            ("单节点 压测 决策请求 每秒", "单节点压测"),
            ("消息队列 分区 扩容 规范", "消息队列分区"),
        ),
    )
    b.say(
        "## 第8节容量规划核查结论\n- 按提案的峰值 QP"
        "S 和单节点能力复算，决策网关至少需要 40 个节点，"
        "提案中的节点数不足。\n- 30% 安全余量与容量基线手册一致。\n"
        "以上是完整的核查报告，优先处理 🔴 一级问题。"
    )


def _follow_ups(b: SessionBuilder, rng: random.Random, size: int) -> None:
    """The user asks for every section, then for a verbatim quote of the proposal."""
    b.ask("你没有返回完整信息。请把每一节的核查结论都列出来，逐节对照提案原文。")
    b.tool_round(
        "补充检索时间表和风险相关的发布规范。",
        _workspace(rng, size, ("发布规范 影子流量 灰度 回滚", "发布规范 影子流量")),
    )
    b.say(
        "## 逐节核查\n- 第1–3节：背景与现状描述与文"
        "档一致。\n- 第4.1节：特征服务拆分符合规范。\n"
        "- 第4.2节：规则编排方式未在规范中出现，需要补充"
        "评审。\n- 第5–6节：数据流与存储选型一致。\n"
        "- 第9节：影子流量比对两周，发布规范要求至少三周。\n- 第10节：时间表依赖第8节扩容，"
        "建议顺延。"
    )
    b.ask("第 8 节里提案写的峰值 QPS 和节点数到底是多少？请直接引用提案原文。")
    b.say(
        "提案第 8 节原文中的峰值 QPS 与节点数如下（逐字引用）：见提案“## 8 容量规划”一节。"
        "按该数字复算后仍建议把决策网关扩到 40 个节点以上。"
    )


def build_proposal_review(*, quick: bool = False, seed: int = 1) -> list[BaseMessage]:
    """The session's messages (`quick` uses shorter retrievals)."""
    rng = random.Random(f"proposal-session:{seed}")
    size = 18_000 if quick else 47_000
    proposal = proposal_text(seed)
    b = SessionBuilder("pr", _SYSTEM)
    b.ask(
        "下面是我们团队的扩容提案原文，请对照我们的文档核对这份提案有没有错误，"
        "按小节给出核查结论，优先标出会影响上线的问题。\n\n" + proposal
    )
    _gateway_and_sla(b, rng, size)
    _capacity(b, rng, size)
    _follow_ups(b, rng, size)
    return [m for m in b.messages if isinstance(m, BaseMessage)]
