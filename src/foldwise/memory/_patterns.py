"""The explicit-statement patterns of the rules extractor, English and Chinese.

Each pattern names a *family* (which slot it fills) and whether it retracts. Order matters:
retractions and corrections first ("I no longer live in" before "I live in"), specific before
general ("I moved to" before "I switched to", "我不喜欢" before "我喜欢"). A pattern's first
group (or its ``value`` group) is the value; `clean_value` trims particles around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PATTERNS", "ClausePattern", "clean_value"]


@dataclass(frozen=True)
class ClausePattern:
    """One statement pattern: the slot family it fills and whether it closes the slot."""

    family: str
    regex: re.Pattern[str]
    retract: bool = False


_I = re.IGNORECASE
_NOW = r"(?:now |currently |recently |just |also |actually )*"
_ZH_NOW = (
    r"(?:现在|目前|已经|刚刚|刚|也|还|其实|最近|平时|一般|主要|去年|今年|前年|上个月|早就|后来)*"
)
_PROFESSIONS = (
    r"engineer|developer|designer|manager|scientist|teacher|student|doctor|nurse|researcher"
    r"|analyst|writer|lawyer|consultant|architect|administrator|sysadmin|programmer"
    r"|accountant|professor|founder|cto|ceo|intern|editor|translator|photographer|dentist"
    r"|pharmacist|chef|pilot|journalist|economist|statistician|tester|product owner"
)
_ZH_PROFESSIONS = (
    r"工程师|开发者|开发|程序员|设计师|经理|老师|教师|学生|医生|护士|研究员|分析师|作家|律师"
    r"|顾问|架构师|管理员|会计|教授|实习生|编辑|翻译|摄影师|运维|测试|产品经理|研究生|博士生"
)


def _p(family: str, pattern: str, *, retract: bool = False, flags: int = _I) -> ClausePattern:
    return ClausePattern(family, re.compile(pattern, flags), retract)


PATTERNS: tuple[ClausePattern, ...] = (
    # Forget / remember wrap another statement; the extractor parses what they wrap.
    _p("forget", r"^(?:please )?forget (?:that |about )?(?P<value>(?:i|my)\b.+)$"),
    _p("forget", r"^(?:请)?忘(?:掉|记)(?:掉)?(?P<value>我.+)$"),
    _p(
        "remember",
        r"^(?:please |and |also )?(?:remember|note|keep in mind|don't forget|do not forget)"
        r"(?: that|:|,)?\s+(?P<value>.+)$",
    ),
    _p("remember", r"^(?:请|你要|要)?(?:记住|记得|请记住|别忘了)[：:，,]?\s*(?P<value>.+)$"),
    _p(
        "standing",
        r"^(?:and |also )?(?:from now on|going forward|from here on|in (?:the )?future"
        r"|henceforth)[,:]?\s+(?P<value>.+)$",
    ),
    _p("standing", r"^(?:以后|今后|从现在开始|从现在起|从今以后)[，,：:]?\s*(?P<value>.+)$"),
    # Retractions and corrections.
    _p(
        "home_city",
        r"\bi (?:no longer|don't|do not) live in (?P<value>.+?)(?: any ?more)?$",
        retract=True,
    ),
    _p(
        "employer",
        r"\bi (?:no longer|don't|do not) work (?:at|for) (?P<value>.+?)(?: any ?more)?$",
        retract=True,
    ),
    _p(
        "employer",
        r"\bi(?:'m| am) no longer (?:working|employed) (?:at|for|by) (?P<value>.+)$",
        retract=True,
    ),
    _p(
        "employer",
        r"\bi (?:quit|left) (?:my job at |my job|my position at )?(?P<value>.*)$",
        retract=True,
    ),
    _p("tool", r"\bi (?:no longer|don't|do not) use (?P<value>.+?)(?: any ?more)?$", retract=True),
    _p(
        "likes",
        r"\bi (?:no longer|don't|do not) (?:like|love|enjoy) (?P<value>.+?) any ?more$",
        retract=True,
    ),
    _p("likes", r"\bi no longer (?:like|love|enjoy) (?P<value>.+)$", retract=True),
    _p(
        "home_city",
        r"我(?:已经)?不再住在(?P<value>.+)$|我(?:已经)?不住在(?P<value2>.+?)了$",
        retract=True,
    ),
    _p("employer", r"我(?:已经)?(?:不再|不)在(?P<value>.+?)(?:工作|上班)了?$", retract=True),
    _p("employer", r"我(?:已经)?(?:从(?P<value>.+?))?离职了?$", retract=True),
    _p("tool", r"我(?:已经)?(?:不再|不)(?:用|使用)(?P<value>.+?)了?$", retract=True),
    _p("likes", r"我(?:已经)?不再喜欢(?P<value>.+?)了?$", retract=True),
    # Identity, place, work.
    _p(
        "name",
        r"\b(?:my name is|my name's|call me|i go by|i'm called|i am called)\s+(?P<value>.+)$",
    ),
    _p("name", r"(?:我叫|叫我|我的名字(?:是|叫)|我的英文名(?:是|叫))(?P<value>.+)$"),
    _p("home_city", rf"\bi(?:'ve| have)? {_NOW}(?:moved|relocated) (?:back )?to (?P<value>.+)$"),
    _p("home_city", rf"\bi {_NOW}live in (?P<value>.+)$"),
    _p("home_city", rf"\bi(?:'m| am) {_NOW}(?:based|living|located) in (?P<value>.+)$"),
    _p("home_city", r"\bmy home ?(?:city|town) is (?P<value>.+)$"),
    _p("home_city", rf"我{_ZH_NOW}(?:搬到|搬去|搬家到)了?(?P<value>.+)$"),
    _p("home_city", rf"我{_ZH_NOW}(?:住在|定居在|住)(?P<value>.+)$"),
    _p("home_city", rf"我{_ZH_NOW}在(?P<value>.+?)(?:生活|定居)$"),
    _p("role", rf"\bi {_NOW}work as (?:an? |the )?(?P<value>.+)$"),
    _p("role", r"\bmy (?:job|role|position|title|job title) is (?:an? |the )?(?P<value>.+)$"),
    _p(
        "role",
        rf"\bi(?:'m| am) {_NOW}(?:an?|the) (?P<value>(?:[\w-]+ ){{0,3}}(?:{_PROFESSIONS}))\b",
    ),
    _p(
        "responsibility",
        rf"\bi {_NOW}(?:admin|administer|maintain|manage|run|own|lead|moderate) (?P<value>.+)$",
    ),
    _p("volunteer", rf"\bi {_NOW}volunteer (?:at|for|with) (?P<value>.+)$"),
    _p("volunteer", rf"我{_ZH_NOW}(?:在|给)(?P<value>.+?)(?:做|当)志愿者$"),
    _p("employer", rf"\bi {_NOW}work (?:at|for) (?P<value>.+)$"),
    _p("employer", rf"\bi(?:'ve| have)? {_NOW}joined (?P<value>.+)$"),
    _p("employer", rf"\bi(?:'m| am) {_NOW}(?:employed|working) (?:at|by|for) (?P<value>.+)$"),
    _p("employer", r"\bmy employer is (?P<value>.+)$"),
    _p("employer", rf"我{_ZH_NOW}在(?P<value>.+?)(?:工作|上班|任职)$"),
    _p("employer", rf"我{_ZH_NOW}(?:入职了?|加入了|跳槽到了?)(?P<value>.+)$"),
    _p("role", rf"我{_ZH_NOW}是(?:一名|一个|一位|个)?(?P<value>\S*?(?:{_ZH_PROFESSIONS}))$"),
    _p("role", r"我的(?:职位|工作|岗位|职业)是(?P<value>.+)$"),
    _p(
        "role",
        rf"我{_ZH_NOW}(?:在.+?)?(?:当|做)(?:一名|一个|一位|个)?(?P<value>\S*?(?:{_ZH_PROFESSIONS}))$",
    ),
    _p("responsibility", rf"我{_ZH_NOW}(?:负责|管理|维护)(?P<value>.+)$"),
    _p("language", r"\bmy (?:native|first|mother) (?:language|tongue) is (?P<value>.+)$"),
    _p("language", r"\bi(?:'m| am) a native (?P<value>\w+) speaker\b"),
    _p("language", r"我的母语是(?P<value>.+)$"),
    # Tools (before likes/prefer: "I switched to vim" is a tool, not a taste).
    _p(
        "tool",
        r"\bi(?:'ve| have)? (?:\w+ )?(?:switched|migrated|changed|moved)(?: over)?"
        r"(?: from .+?)? to (?P<value>.+)$",
    ),
    _p("tool", rf"\bi(?:'m| am)? {_NOW}(?:mainly |mostly |usually )?(?:use|using) (?P<value>.+)$"),
    _p("tool", r"(?:改用|换成|换用|切换到|迁移到|改成用)(?P<value>.+)$"),
    _p("tool", rf"我{_ZH_NOW}从.+?(?:换到|切换到|迁移到)了?(?P<value>.+)$"),
    _p("tool", rf"我{_ZH_NOW}(?:在用|使用|用)(?P<value>[A-Za-z0-9][\w .+#-]*|.+?)$"),
    # Tastes.
    _p("prefer", r"\bmy (?:favou?rite|preferred) (?P<topic>[\w ]+?) (?:is|are) (?P<value>.+)$"),
    _p("prefer", r"\bi(?:'d)? (?:\w+ )?prefer (?P<value>.+)$"),
    _p("dislikes", r"\bi (?:really |also )?(?:don't|do not|never) (?:like|enjoy) (?P<value>.+)$"),
    _p("dislikes", r"\bi (?:really |also )?(?:hate|dislike|detest|can't stand) (?P<value>.+)$"),
    _p("likes", r"\bi (?:really |also |do )?(?:like|love|enjoy|adore) (?P<value>.+)$"),
    _p("prefer", r"我最喜欢的(?P<topic>.+?)是(?P<value>.+)$"),
    _p("prefer", rf"我{_ZH_NOW}(?:更喜欢|更偏好|偏好|倾向于|习惯)(?P<value>.+)$"),
    _p("dislikes", rf"我{_ZH_NOW}(?:很|特别|非常)?(?:不喜欢|讨厌|不爱|受不了)(?P<value>.+)$"),
    _p("likes", rf"我{_ZH_NOW}(?:很|特别|非常)?(?:喜欢|爱|热爱)(?P<value>.+)$"),
    # Standing style requests addressed as imperatives ("Always answer in Chinese").
    _p("standing", r"^(?:please )?(?P<value>(?:always|never) .+)$"),
    _p("standing", r"^(?:请)?(?P<value>(?:总是|始终|一直|永远|每次都|不要再?).+)$"),
)

_EN_TAIL = re.compile(
    r"(?:\s+(?:now|these days|nowadays|any ?more|instead|too|as well|from now on|please"
    r"|again|for good|for real|recently|last (?:week|month|year|summer|winter)|this year"
    r"|in (?:19|20)\d\d|(?:a few|two|three|\d+) (?:days|weeks|months|years) ago))+$",
    re.IGNORECASE,
)
_ZH_TAIL = re.compile(
    r"(?:上个月|去年|今年|最近|了|啦|呢|吧|哦|啊|呀|现在|了哦|去了|来了|工作了|上班了)+$"
)


def clean_value(value: str) -> str:
    """`value` without trailing particles ("now", "anymore", "了") or punctuation."""
    value = value.strip(" \t，,。.!！?？:：;；\"'“”‘’")
    previous = None
    while previous != value:
        previous = value
        value = _EN_TAIL.sub("", value)
        value = _ZH_TAIL.sub("", value).strip(" \t，,。.!！?？")
    return value
