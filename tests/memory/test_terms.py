"""The memory search tokenizer and the reference BM25 index."""

from __future__ import annotations

import pytest

from foldwise.memory._bm25 import BM25Index
from foldwise.memory._terms import MAX_QUERY_TERMS, MAX_WORD_CHARS, index_terms, query_terms


def test_cjk_runs_index_unigrams_and_bigrams() -> None:
    assert index_terms("我住在北京") == [
        "我", "住", "在", "北", "京", "我住", "住在", "在北", "北京",
    ]  # fmt: skip
    assert index_terms("京") == ["京"]


def test_latin_words_are_folded_and_scripts_split() -> None:
    assert index_terms("I use Python3.12 и Vim") == ["i", "use", "python3", "12", "и", "vim"]
    assert index_terms("ＡＢＣ　ｄｅｆ") == ["abc", "def"]  # NFKC: full-width to ASCII
    assert index_terms("Python数据") == ["python", "数", "据", "数据"]
    assert index_terms("snake_case-word") == ["snake", "case", "word"]
    assert index_terms("東京タワー") == [
        "東", "京", "タ", "ワ", "ー", "東京", "京タ", "タワ", "ワー",
    ]  # fmt: skip
    assert index_terms("서울") == ["서", "울", "서울"]


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("北京", ["北京"]),
        ("京", ["京"]),
        ("北京大学", ["北京", "京大", "大学"]),
        ("Python 数据", ["python", "数据"]),
        ("東京", ["東京"]),
        ("tea tea TEA", ["tea"]),
        ("?! ...", []),
    ],
)
def test_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


def test_long_words_and_long_queries_are_bounded() -> None:
    assert index_terms("x" * 500) == ["x" * MAX_WORD_CHARS]
    assert query_terms("X" * 500) == ["x" * MAX_WORD_CHARS]
    many = " ".join(f"w{i}" for i in range(200))
    assert query_terms(many) == [f"w{i}" for i in range(MAX_QUERY_TERMS)]


def test_every_query_term_of_a_text_is_one_of_its_index_terms() -> None:
    for text in ["我住在北京", "I live in 東京 since 2020", "数据 Python データ分析"]:
        assert set(query_terms(text)) <= set(index_terms(text))


def test_bm25_prefers_rare_terms_more_matches_and_shorter_documents() -> None:
    index = BM25Index()
    for i in range(10):
        index.add(f"common{i}", ["apple", "pie", str(i)])
    index.add("rare", ["zebra", "stripes"])
    index.add("both", ["apple", "zebra"])
    index.add("long", ["zebra", *["word"] * 30])
    scores = index.scores(["apple", "zebra"])
    assert scores["both"] > scores["rare"] > scores["common0"]
    assert scores["rare"] > scores["long"]
    assert "missing" not in scores and len(index) == 13


def test_bm25_remove_and_replace() -> None:
    index = BM25Index()
    index.add("a", ["tea"])
    index.add("b", ["tea", "jazz"])
    index.add("a", ["coffee"])  # replaces
    assert set(index.scores(["tea"])) == {"b"}
    index.remove("b")
    index.remove("b")
    assert index.scores(["tea", "jazz"]) == {}
    assert "a" in index and "b" not in index
    assert BM25Index().scores(["x"]) == {}
