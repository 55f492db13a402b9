"""The scope gate, fail-closed: only user-scoped, durable, descriptive facts enter memory.

DeerFlow's gate trusts the extractor's labels (bytedance/deer-flow#4603 promoted "this PR must
not modify the API" to a user's profile before it existed). This one checks the labels *and*
re-reads the text, and the text of the evidence clauses that share words with it, so an
extractor that labels a task-scoped statement ``durable`` still cannot promote it. A candidate
passes only when no check fires; every refusal has a reason code:

- ``task_scoped``: about the current task, session or moment: "this PR must not change the API",
  "reply in English this time", "本次…", "这次…", "today's deadline is 5pm"; or labelled
  ``task`` / ``session`` scope.
- ``transactional_grant``: a permission for the task at hand: "you may force-push", "feel free
  to delete the branch", "可以直接删除", "不用确认"; or labelled ``grant``.
- ``task_state``: the state of the work: "I'm debugging the login bug", "the build is failing",
  "我正在修复这个问题".
- ``transient``: a passing state of the user: "I'm tired", "I'm at the airport", "我有点累".
- ``not_about_user``: about someone or something else: "my colleague uses Emacs", "the project
  uses Django", "他住在北京"; a subject other than ``user``; labelled ``agent`` scope.
- ``directive``: an instruction to the agent that is not a standing style preference
  ("make sure to double-check the numbers"), or labelled ``directive``. Response-style requests
  ("always answer in Chinese", "以后用中文回答") are descriptive preferences and pass.
  A fact outside the ``preference:*`` and ``name`` slots that talks to the agent ("you",
  "your", "你") is refused as ``directive`` too ("I'm the CEO, you have clearance …").
- ``low_confidence``: the extractor's confidence is below `MIN_CONFIDENCE`.

`screen` runs the quarantine first (an attack is held for review, not silently dropped), then
the gate.
"""

from __future__ import annotations

import re
from typing import Literal

from foldwise.memory._facts import Candidate
from foldwise.memory._lexicon import split_clauses
from foldwise.memory._quarantine import quarantine_reason

__all__ = ["GATE_REASONS", "MIN_CONFIDENCE", "scope_reason", "screen"]

MIN_CONFIDENCE = 0.7
"""Candidates below this confidence are refused (DeerFlow's threshold)."""

GATE_REASONS = (
    "task_scoped",
    "transactional_grant",
    "task_state",
    "transient",
    "not_about_user",
    "directive",
    "low_confidence",
)
"""Every code `scope_reason` returns."""

_I = re.IGNORECASE
_TASK_NOUNS = (
    r"pr|pull request|mr|merge request|task|ticket|issue|session|conversation|chat|thread|branch"
    r"|commit|change|changes|diff|patch|file|function|module|script|build|release|sprint|run|step"
    r"|job|migration|deploy|deployment|refactor|bug|test|tests|meeting|query|request|answer|reply"
    r"|response|document|draft|email|report|repo|repository|codebase|week|weekend|month|morning"
    r"|afternoon|evening|time|round|turn|iteration|endpoint|table|feature|review|demo|summary"
)
_TASK_SCOPED = re.compile(
    rf"\b(?:this|the current|current|that|these|today's|tonight's|tomorrow's) (?:{_TASK_NOUNS})\b"
    r"|\b(?:for now|right now|just (?:for )?(?:now|today|once)|only (?:for|in) this|today|tonight"
    r"|tomorrow|this afternoon|deadline|due (?:by|on|at)|by (?:eod|end of (?:day|week)|monday"
    r"|tuesday|wednesday|thursday|friday|noon|\d{1,2}(?::\d\d)? ?(?:am|pm))|until (?:further "
    r"notice|the (?:end|release|merge)|(?:next )?(?:monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday|week|month)|tomorrow|then|later)|(?:just |only )?this once|temporarily"
    r"|for the moment|for the rest of"
    r"|before (?:the )?(?:merge|release|deploy|demo|review)|next (?:step|commit)|asap|for this"
    r"|in this (?:one|case|instance))\b"
    r"|本次|这次|此次|这一次|这回|这一轮|本轮|这个(?:pr|PR|任务|需求|文件|函数|分支|提交|项目|版本|会话|对话"
    r"|问题|bug|工单|接口|模块|脚本|表|功能)|这份|这段|当前(?:任务|会话|对话|项目|分支|版本)|今天|今晚|明天"
    r"|后天|本周|这周|这个月|本月|暂时|临时|先这样|目前先|截止|仅限|只在这|这里的|下次提交",
    _I,
)
_GRANT = re.compile(
    r"\byou(?:'re| are) (?:allowed|permitted|free) to\b"
    r"|\byou (?:may|can|could|are allowed to|are permitted to|have (?:my )?permission to"
    r"|have the green light to|are free to)\b(?! (?:call|address|reach|contact) me\b)"
    r"|\b(?:feel free to|go ahead and|it's (?:ok|okay|fine) (?:to|if you)|it is (?:ok|okay|fine)"
    r" to|you don't (?:need|have) to ask|no need to (?:ask|confirm|check)|without asking"
    r"|without (?:my )?(?:approval|confirmation)|i (?:authorize|allow|permit) you"
    r"|permission granted|i give you (?:permission|access|the right)|skip (?:the )?confirmation)\b"
    r"|可以直接|你可以(?!叫我|称呼我)|允许你|授权你|不用(?:确认|问我|请示|审批)|无需(?:确认|审批|请示)"
    r"|直接(?:删|推|合并|部署|执行|覆盖|提交)|随便(?:删|改|推)|你有权|准许你",
    _I,
)
_TASK_STATE = re.compile(
    r"\b(?:i'm|i am|we're|we are) (?:currently |now |still |just )?(?:working on|debugging|fixing"
    r"|investigating|refactoring|implementing|reviewing|testing|deploying|migrating|trying to"
    r"|in the middle of|stuck on|blocked on|waiting (?:for|on)|looking (?:at|into)|halfway)\b"
    r"|\b(?:the|our|my) (?:build|tests?|ci|pipeline|deploy(?:ment)?|server|branch|pr|migration"
    r"|job|query|endpoint|container|cluster) (?:is|are|was|were|keeps?|has|have|still)"
    r" (?:\w+ )?(?:failing|broken|red|green|down|passing|flaky|running|stuck|timing out|done"
    r"|merged|blocked|failed|crashing|slow)\b"
    r"|\b(?:next step|the failing|stack trace|the traceback|the error message)\b"
    r"|我(?:正在|在)(?:调试|修复|修|排查|重构|实现|写|测试|部署|迁移|看|处理|跑)|正在进行|进行中|报错了|测试(?:失败|挂了)"
    r"|构建失败|卡在|下一步|待办|还没(?:修|合并|部署)",
    _I,
)
_TRANSIENT = re.compile(
    r"\bi(?:'m| am) (?:so |very |really |a bit |kind of |pretty |feeling )?(?:tired|hungry"
    r"|sleepy|sick|ill|busy|bored|stressed|exhausted|in a hurry|running late|late|at (?:the|an?"
    r"|my) (?:airport|office|gym|station|doctor|dentist|cafe|hotel|meeting)|on (?:my way|the "
    r"train|a call|vacation|holiday|leave|the road)|away|offline|out of (?:the )?office)\b"
    r"|\b(?:at the moment|currently feeling|i feel|i'm feeling)\b"
    r"|我(?:现在|今天)?(?:有点|很|好|太)?(?:累|饿|困|忙|烦|难受|生病)|此刻|眼下|在路上|在出差|在休假|在开会",
    _I,
)
_OTHER_SUBJECT = re.compile(
    r"^(?:my|our) (?:colleague|coworker|co-worker|boss|manager|team|teammate|company|wife|husband"
    r"|partner|friend|son|daughter|kid|kids|child|children|mother|father|mom|dad|brother|sister"
    r"|client|customer|neighbou?r|roommate)s?\b"
    r"|^(?:the|this|that|our) (?:project|repo|repository|codebase|app|service|api|server|system"
    r"|database|team|company|library|product)\b|^(?:he|she|they|it|his|her|their)\b"
    r"|^(?:我的|我们的|我)?(?:同事|老板|经理|领导|团队|公司|老婆|老公|妻子|丈夫|朋友|儿子|女儿|孩子|妈妈|爸爸"
    r"|哥哥|姐姐|弟弟|妹妹|客户|邻居|室友)|^(?:这个|该|我们的)(?:项目|仓库|代码库|服务|系统|接口|产品)"
    r"|^(?:他|她|它|他们|她们)",
    _I,
)
_STYLE = (
    r"reply|answer|respond|write|speak|talk|use|format|explain|keep|call me|address me|show"
    r"|give me|include|be|add|cite|summari[sz]e|translate|prefer|avoid|spell|say|refer to me"
)
_DIRECTIVE = re.compile(
    rf"^(?:please |and |also |always |never |from now on,? |do not |don't )*(?!(?:{_STYLE})\b)"
    r"(?:make sure|ensure|remember to|don't forget to|double-check|check|verify|do|go|stop|start"
    r"|help|look|find|tell|ask|let|try|fix|create|update|change|rename|move|set|put|get|send)\b"
    r"|\byou (?:should|need to|must|have to|ought to)\b"
    r"|^(?:请)?(?:务必|一定要|确保|记得要?|帮我|去|先|检查|确认|修改|创建|更新|修复)",
    _I,
)
_WORD = re.compile(r"[a-z0-9]{3,}|[\u4e00-\u9fff]{2}", _I)
_STOP = frozenset({"the", "and", "that", "this", "with", "for", "you", "are", "was", "have"})


def _terms(text: str) -> set[str]:
    terms = {m.group(0).casefold() for m in _WORD.finditer(text)}
    cjk = "".join(re.findall(r"[\u4e00-\u9fff]+", text))
    terms.update(cjk[i : i + 2] for i in range(len(cjk) - 1))
    return terms - _STOP


def _relevant_evidence(text: str, evidence_text: str) -> list[str]:
    """The evidence clauses that state the candidate (they share its words)."""
    wanted = _terms(text)
    need = min(2, len(wanted))
    return [c for c in split_clauses(evidence_text) if len(wanted & _terms(c)) >= max(need, 1)]


_ADDRESSED = re.compile(r"\b(?:you|your|yours|yourself)\b|你|您", _I)
_USER_SUBJECT = re.compile(
    r"^(?:i\b|i'm\b|i've\b|i'd\b|my\b|mine\b|me\b|(?:the )?user\b|(?:the )?user's\b"
    r"|我(?!们|同事|老板|朋友|家人|妈|爸|老婆|老公|女儿|儿子|的(?:同事|老板|朋友|团队|公司|家人|孩子))|用户)",
    _I,
)


def _label_reason(candidate: Candidate) -> str | None:
    if candidate.scope in ("task", "session"):
        return "task_scoped"
    if candidate.scope != "user" or candidate.subject != "user":
        return "not_about_user"
    if candidate.authority == "grant":
        return "transactional_grant"
    if candidate.durability != "durable":
        return "transient"
    if candidate.authority != "descriptive":
        return "directive"
    if candidate.confidence < MIN_CONFIDENCE:
        return "low_confidence"
    return None


_LEAD_IN = re.compile(
    r"^(?:(?:please |and |also |but )?(?:remember|note|keep in mind|don't forget|do not forget)"
    r"(?: that|:|,)?\s+|(?:请)?(?:记住|记得|别忘了)[：:，,]?\s*)",
    _I,
)


def _text_reason(text: str) -> str | None:
    text = _LEAD_IN.sub("", text.strip())
    for code, pattern in (
        ("transactional_grant", _GRANT),
        ("task_scoped", _TASK_SCOPED),
        ("task_state", _TASK_STATE),
        ("transient", _TRANSIENT),
        ("not_about_user", _OTHER_SUBJECT),
        ("directive", _DIRECTIVE),
    ):
        if pattern.search(text):
            return code
    return None


def scope_reason(candidate: Candidate, *, evidence_text: str = "") -> str | None:
    """None when `candidate` is a user-scoped, durable, descriptive fact; else a reason code.

    Args:
        candidate: What an extractor proposed (labels and text are both checked).
        evidence_text: The text of the evidence messages; only the clauses that share words
            with the candidate's text are read, so an unrelated task-scoped sentence in the
            same message does not block a durable fact.
    """
    reason = _label_reason(candidate)
    if reason is not None:
        return reason
    if not candidate.attribute.startswith(("preference:", "name")) and _ADDRESSED.search(
        candidate.text
    ):
        return "directive"  # a fact about the user does not talk to the agent
    if candidate.attribute == "note" and not _USER_SUBJECT.match(_LEAD_IN.sub("", candidate.text)):
        return "not_about_user"  # a slotless note must at least be a statement about the user
    texts = [candidate.text]
    if evidence_text:
        texts.extend(_relevant_evidence(candidate.text, evidence_text))
    for text in texts:
        for clause in split_clauses(text) or [text]:
            reason = _text_reason(clause)
            if reason is not None:
                return reason
    return None


def screen(
    candidate: Candidate, *, evidence_text: str = ""
) -> tuple[Literal["quarantined", "rejected"], str] | None:
    """Quarantine check, then the scope gate: None when the candidate may be stored as active.

    Returns:
        ``("quarantined", code)`` for text that acts on the agent (store it for review),
        ``("rejected", code)`` for out-of-scope text (drop it), else None.
    """
    # A message that tries to act on the agent taints every candidate drawn from it.
    for text in (candidate.text, *split_clauses(evidence_text)):
        code = quarantine_reason(text)
        if code is not None:
            return ("quarantined", code)
    reason = scope_reason(candidate, evidence_text=evidence_text)
    return None if reason is None else ("rejected", reason)
