"""How much more a provider counts than foldwise's estimate, per thread.

A provider's tokenizer can count a request several times what the estimate says (a different
vocabulary, CJK on a cl100k model, hidden templates), or several times less (words the estimate
over-counts). `Calibration` keeps, per thread, the ratio measured from the provider's own
numbers — its usage reports (when clearly above or below the estimate) and the figures in an
overflow refusal — and scales the planning budget by it, so later requests are planned in
provider units. A measured ratio never goes below `MIN_SCALE`. A refusal without numbers only
*guesses* a ratio, and only upwards; a guess, and anything learned by runs without a thread
(they share one key), ends with the run that made it.
"""

from __future__ import annotations

import dataclasses
import threading

from foldwise._lru import LRUDict
from foldwise._thread_id import NO_THREAD
from foldwise.compaction import CompactionPolicy

__all__ = ["CALIBRATE_ABOVE", "MIN_SCALE", "OVERFLOW_SHRINK", "Calibration"]

CALIBRATE_ABOVE = 1.25
"""Provider usage above this multiple of the estimate (or below its inverse) recalibrates."""
MIN_SCALE = 0.25
"""The lowest ratio learned: the planning window grows at most 4x over the estimate's.

The estimate is within about 10% of o200k/cl100k on prose, code, JSON and CJK (`foldwise bench
tokens`), and synthetic tokens it over-counts most come to about 3x; a lower figure more likely
measures something else (a provider that leaves cached or templated tokens out of its usage),
and trusting it would plan requests far past the window.
"""
OVERFLOW_SHRINK = 2.0
"""Assumed under-count when a provider refuses a request without saying by how much."""


class Calibration:
    """Per-thread provider/estimate ratios and the policies they imply."""

    def __init__(self, policy: CompactionPolicy) -> None:
        self.policy = policy
        self._scale: LRUDict[str, float] = LRUDict()
        self._measured: set[str] = set()  # threads whose ratio came from provider numbers
        self._lock = threading.Lock()

    def scale(self, key: str) -> float:
        """The thread's ratio (1.0 when nothing was learned)."""
        return self._scale.get(key, 1.0)

    def policy_for(self, key: str, window: int | None = None) -> CompactionPolicy:
        """The policy in estimate units: the window (and reserve) shrunk by the thread's ratio."""
        scale = self.scale(key)
        window = window or self.policy.context_window
        if window is None or (scale == 1.0 and window == self.policy.context_window):
            return self.policy
        return dataclasses.replace(
            self.policy,
            context_window=max(1, int(window / scale)),
            reserved_output_tokens=int(self.policy.reserved_output_tokens / scale),
        )

    def usage(self, key: str, measured: int, estimated: int) -> None:
        """Learn from a usage report: the provider measured `measured` for `estimated`."""
        if estimated <= 0 or measured <= 0:
            return
        ratio = measured / estimated
        with self._lock:
            if key in self._scale or not 1 / CALIBRATE_ABOVE <= ratio <= CALIBRATE_ABOVE:
                self._scale[key] = max(MIN_SCALE, ratio)
                self._measured.add(key)

    def refusal(self, key: str, counted: int | None, estimated: int) -> float:
        """Learn from an overflow refusal (with its count, when given); returns the new ratio.

        A count clearly below what the current ratio implies is followed down (`retry_policy`
        still plans the retry below `counted`); otherwise the ratio grows by at least a tenth.
        """
        current = self.scale(key)
        if counted is not None and estimated > 0:
            measured = counted / estimated
            if measured * CALIBRATE_ABOVE < current:
                scale = max(MIN_SCALE, measured)
            else:
                scale = max(current * 1.1, measured)
        else:
            scale = current * OVERFLOW_SHRINK
        with self._lock:
            self._scale[key] = scale
            if counted is not None:
                self._measured.add(key)
        return scale

    def retry_policy(self, key: str, window: int, counted: int | None) -> CompactionPolicy:
        """The policy of the retry after a refusal in a `window` (provider units).

        The provider refused `counted` input tokens (alone, or with its `max_tokens`), so the
        retry's window is kept below them: whichever way `refusal` moved the ratio, the retry
        is planned strictly smaller in provider units, and refusals cannot loop.
        """
        if counted is not None:
            window = min(window, max(1, counted - 1))
        return self.policy_for(key, window)

    def new_run(self, key: str) -> None:
        """Drop a guessed ratio (and any ratio of threadless runs) when a run starts."""
        with self._lock:
            if key not in self._measured or key == NO_THREAD:
                self._scale.pop(key, None)
                self._measured.discard(key)
