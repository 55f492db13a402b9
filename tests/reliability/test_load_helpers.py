"""The load area's pure helpers: percentiles, the RSS flatness rule, the stub's directives."""

from __future__ import annotations

from foldwise.bench._rel_load_serve import flat_rss
from foldwise.bench._rel_load_stub import SUMMARY, HotCounter, reply
from foldwise.bench._serve import MIB, percentile


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) == 0.0


def test_rss_is_flat_within_ten_percent_or_twenty_mib() -> None:
    steady = [200 * MIB] * 6 + [215 * MIB] * 3  # +15 MiB: under 20 MiB
    assert flat_rss(steady, "x")[1] is None
    grown = [200 * MIB] * 6 + [230 * MIB] * 3  # +30 MiB: over 20 MiB and over 10 %
    finding = flat_rss(grown, "x")[1]
    assert finding is not None
    assert finding.invariant == "rss-flat"
    big = [1000 * MIB] * 6 + [1090 * MIB] * 3  # +90 MiB but under 10 %
    assert flat_rss(big, "x")[1] is None
    assert flat_rss([1, 2], "x") == ("RSS 2 samples (too few to judge)", None)


def _body(text: str) -> dict[str, object]:
    return {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": text}]}


def test_the_stub_echoes_pads_and_counts_hot_calls() -> None:
    hot = HotCounter()
    answer = str(reply(_body("turn 3 pad=50."), hot))
    assert answer.startswith("re: turn 3 pad=50.")
    assert len(answer) == len("re: turn 3 pad=50.") + 1 + 50
    reply(_body("burst hot=reject delay=0"), hot)
    assert hot.calls["reject"] == 1
    assert hot.peak["reject"] == 1
    summarizer = {"messages": [{"role": "user", "content": "<new_messages>x</new_messages>"}]}
    assert reply(summarizer, hot) == SUMMARY
