"""The offload benchmark: the scripted big-corpus run with offload off and on."""

from __future__ import annotations

from foldwise.bench._offload_session import make_corpus_page, run_offload_benchmark


def test_corpus_pages_are_deterministic_and_sized() -> None:
    page = make_corpus_page("timeline part 1")
    assert len(page) == 47_000
    assert page == make_corpus_page("timeline part 1")
    assert page != make_corpus_page("timeline part 2")


def test_offload_keeps_every_request_under_the_trigger() -> None:
    result = run_offload_benchmark()
    off, on = result["off"], result["on"]
    assert off["requests"] == on["requests"] == 13
    assert off["answered"] and on["answered"]
    assert off["requests_over_trigger"] >= 8
    assert on["requests_over_trigger"] == 0
    assert on["artifacts"] == on["offloads_recorded"] == 12
    assert on["peak_request_tokens"] < 48_000 < off["peak_request_tokens"]
    assert result["total_ratio"] < 0.2
