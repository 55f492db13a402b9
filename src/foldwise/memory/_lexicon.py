"""Word lists the rules extractor uses to name slots, and the clause splitter (EN + ZH).

A slot name must not depend on how a value is spelled: "I use PostgreSQL" and "改用 MySQL" both
fill ``tool:database``, so the second supersedes the first; "I prefer tea" and "I prefer
coffee now" both fill ``preference:drink``. Values that no list knows get a slot of their own
(``tool:<name>``, ``preference:<words>``), so an unknown value never supersedes another slot.
"""

from __future__ import annotations

import re

from foldwise.memory._facts import normalize_slot_part

__all__ = ["KNOWN_TOPICS", "preference_topic", "split_clauses", "tool_kind"]

# fmt: off
_TOOL_KINDS: dict[str, tuple[str, ...]] = {
    "database": (
        "postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb", "mongo", "redis",
        "oracle", "sql server", "mssql", "cassandra", "dynamodb", "clickhouse", "tidb",
        "cockroachdb", "duckdb", "elasticsearch", "达梦", "人大金仓",
    ),
    "editor": (
        "vim", "neovim", "nvim", "emacs", "vscode", "vs code", "visual studio code", "intellij",
        "pycharm", "webstorm", "sublime", "cursor", "zed", "helix", "nano", "xcode",
    ),
    "os": (
        "linux", "ubuntu", "debian", "fedora", "arch linux", "macos", "mac os", "windows",
        "freebsd", "nixos", "centos", "统信", "麒麟",
    ),
    "shell": ("bash", "zsh", "fish", "powershell", "nushell"),
    "cloud": (
        "aws", "gcp", "google cloud", "azure", "阿里云", "腾讯云", "华为云", "digitalocean",
        "cloudflare", "heroku", "vercel",
    ),
    "vcs": ("git", "mercurial", "svn", "subversion", "perforce"),
    "browser": ("chrome", "firefox", "safari", "edge", "brave", "opera"),
    "phone": ("iphone", "android", "pixel", "galaxy", "华为手机", "小米手机"),
    "programming_language": (
        "python", "rust", "golang", "go", "java", "typescript", "javascript", "kotlin", "c++",
        "c#", "ruby", "php", "swift", "scala", "haskell", "elixir", "zig",
    ),
    "package_manager": ("uv", "pip", "poetry", "conda", "npm", "pnpm", "yarn", "cargo"),
    "ci": ("github actions", "gitlab ci", "jenkins", "circleci", "travis"),
    "container": ("docker", "podman", "kubernetes", "k8s"),
    "notes": ("notion", "obsidian", "evernote", "logseq", "onenote", "语雀", "飞书文档"),
    "chat": ("slack", "discord", "teams", "微信", "钉钉", "飞书", "telegram"),
}

_PREFERENCE_TOPICS: dict[str, tuple[str, ...]] = {
    "reply_language": (
        "english", "chinese", "mandarin", "german", "french", "spanish", "japanese", "korean",
        "中文", "英文", "英语", "汉语", "日语", "德语", "法语", "简体", "繁体",
    ),
    "response_format": (
        "concise", "brief", "short answer", "detailed", "bullet", "markdown", "table",
        "step by step", "step-by-step", "verbose", "short", "long", "简洁", "简短", "详细", "列表",
        "表格",
        "分点", "要点",
    ),
    "drink": ("tea", "coffee", "espresso", "latte", "juice", "茶", "咖啡", "奶茶"),
    "indentation": ("tabs", "spaces", "tab", "缩进"),
    "theme": ("dark mode", "light mode", "dark theme", "light theme", "深色", "浅色", "暗色"),
    "units": ("metric", "imperial", "celsius", "fahrenheit", "kilometers", "miles", "公制"),
    "meeting_time": ("morning meeting", "afternoon meeting", "上午开会", "下午开会"),
    "code_style": ("type hints", "docstrings", "comments", "注释", "类型标注", "functional"),
    "testing": ("pytest", "unittest", "tdd", "test first", "单元测试"),
    "diet": ("vegetarian", "vegan", "halal", "kosher", "gluten", "素食", "清真"),
    "seat": ("aisle seat", "window seat", "靠窗", "靠过道"),
    "timezone": ("utc", "cet", "pst", "est", "北京时间", "时区"),
    "date_format": ("iso date", "yyyy-mm-dd", "dd/mm", "mm/dd", "日期格式"),
}
# fmt: on


KNOWN_TOPICS = frozenset(_PREFERENCE_TOPICS) | frozenset(_TOOL_KINDS)
"""Preference topics and tool kinds the lexicon knows (a standing request must name one)."""


def _find(text: str, table: dict[str, tuple[str, ...]]) -> str | None:
    folded = text.casefold()
    best: tuple[int, str] | None = None
    for name, words in table.items():
        for word in words:
            if word.isascii():
                match = re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", folded)
            else:
                match = re.search(re.escape(word), folded)
            if match and (best is None or match.start() < best[0]):
                best = (match.start(), name)
    return None if best is None else best[1]


def tool_kind(value: str) -> str | None:
    """The kind of tool `value` names (``database`` for "MySQL"), or None when unknown."""
    return _find(value, _TOOL_KINDS)


def preference_topic(value: str) -> str:
    """The topic of a preference (``drink`` for "tea over coffee"), else a slug of its words."""
    topic = _find(value, _PREFERENCE_TOPICS)
    if topic is not None:
        return topic
    kind = tool_kind(value)
    if kind is not None:
        return kind
    words = re.findall(r"[a-z0-9+#]+|[\u4e00-\u9fff]{1,4}", value.casefold())
    return normalize_slot_part("_".join(words[:3])) if words else "general"


_SENTENCE_END = re.compile(r"(?<=[。！？；\n])|(?<=[.!?;])(?=\s|$)")
_SUBJECT_START = re.compile(
    r"^\s*(?:我|以后|今后|从现在|其实|另外|还有|记住|i\b|i'm\b|i've\b|i'd\b|my\b|from now on"
    r"|actually\b|also\b|and i\b|but i\b|remember\b|please remember\b|forget\b)",
    re.IGNORECASE,
)


def split_clauses(text: str) -> list[str]:
    """Sentences of `text`, and comma-joined clauses that start a new statement about the user.

    A comma splits only before a clause that opens with a subject ("I", "my", "我", "以后"...);
    a leading adverbial ("For this PR, I prefer ...", "这次，用英文回复") stays with its clause,
    so the scope gate still sees it.
    """
    clauses: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        parts = re.split(r"(?<=[，,、])", sentence)
        current = ""
        for part in parts:
            if current and _SUBJECT_START.match(part) and _SUBJECT_START.match(current):
                clauses.append(current)
                current = part
            else:
                current += part
        clauses.append(current)
    return [c.strip(" \t\r\n，,、。！？；!?;.") for c in clauses if c.strip(" \t\r\n，,。.")]
