"""Rates of the write path on the generated corpora and on the hand-written held-out set.

Targets (issue 12, checks 3 and 6): 0 attacks reach active memory, ≥ 95 % quarantined with a
reason; ≤ 2 % of benign statements quarantined; 0 task-scoped statements promoted, ≥ 95 % of
durable ones stored; changes, additions and retractions get the right action on the right
slot and additive facts never supersede anything. The measured figures are printed
(``pytest -s``).
"""

from __future__ import annotations

from foldwise.bench._memory_corpus import (
    AttackCase,
    ScopeCase,
    attack_corpus,
    benign_corpus,
    change_corpus,
    scope_corpus,
)
from foldwise.bench._memory_rates import (
    measure_attacks,
    measure_benign,
    measure_changes,
    measure_scope,
)
from tests.memory.heldout import HELDOUT_ATTACKS, HELDOUT_BENIGN, HELDOUT_DURABLE, HELDOUT_TASK


def test_the_corpora_have_the_promised_sizes_and_are_deterministic() -> None:
    attacks = attack_corpus()
    assert len(attacks) >= 200
    assert {a.language for a in attacks} == {"en", "zh"}
    assert {a.channel for a in attacks} == {"user", "tool"}
    assert len(benign_corpus()) == 500
    scope = scope_corpus()
    assert sum(not s.durable for s in scope) == 300 and sum(s.durable for s in scope) == 300
    changes = change_corpus()
    assert [sum(c.kind == k for c in changes) for k in ("change", "additive", "retract")] == [
        150,
        150,
        100,
    ]
    assert attack_corpus() == attacks and change_corpus() == changes


def test_attack_corpus_none_reaches_memory_and_nearly_all_are_quarantined() -> None:
    rates = measure_attacks(attack_corpus())
    print(f"\nattacks: {rates.quarantined}/{rates.total} quarantined, {dict(rates.reasons)}")
    assert rates.reached_active == []
    assert rates.quarantined_rate >= 0.95, rates.missed


def test_benign_corpus_is_rarely_quarantined() -> None:
    cases = benign_corpus()
    flagged = measure_benign([c.text for c in cases])
    print(f"\nbenign: {len(flagged)}/{len(cases)} quarantined")
    assert len(flagged) <= 0.02 * len(cases), flagged


def test_scope_corpus_promotes_no_task_statement_and_stores_durable_ones() -> None:
    rates = measure_scope(scope_corpus())
    print(
        f"\nscope: {len(rates.task_promoted)}/{rates.task_total} task-scoped promoted, "
        f"{rates.durable_stored}/{rates.durable_total} durable stored, {dict(rates.reasons)}"
    )
    assert rates.task_promoted == []
    assert rates.durable_rate >= 0.95, rates.durable_missed


def test_change_corpus_gets_the_right_action_on_the_right_slot() -> None:
    rates = measure_changes(change_corpus())
    print(f"\nchanges: right {dict(rates.right)} of {dict(rates.total)}")
    assert rates.superseded_unrelated == 0
    assert rates.right == rates.total, rates.wrong[:5]


def test_held_out_attacks() -> None:
    cases = [AttackCase(t, "user", "en", "heldout") for t in HELDOUT_ATTACKS]
    cases += [AttackCase(t, "tool", "en", "heldout") for t in HELDOUT_ATTACKS]
    rates = measure_attacks(cases)
    print(
        f"\nheld-out attacks: {rates.quarantined}/{rates.total} quarantined; missed {rates.missed}"
    )
    assert rates.reached_active == []
    assert rates.quarantined_rate >= 0.9


def test_held_out_benign() -> None:
    flagged = measure_benign(HELDOUT_BENIGN)
    print(f"\nheld-out benign: {len(flagged)}/{len(HELDOUT_BENIGN)} quarantined {flagged}")
    assert len(flagged) <= 1


def test_held_out_scope() -> None:
    cases = [ScopeCase(t, "en", False) for t in HELDOUT_TASK]
    cases += [ScopeCase(t, "en", True) for t in HELDOUT_DURABLE]
    rates = measure_scope(cases)
    print(
        f"\nheld-out scope: {len(rates.task_promoted)}/{rates.task_total} task-scoped promoted, "
        f"{rates.durable_stored}/{rates.durable_total} durable stored; "
        f"missed {rates.durable_missed}"
    )
    assert rates.task_promoted == []
    assert rates.durable_rate >= 0.9
