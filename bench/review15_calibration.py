"""Review 15: one odd provider count replaces a thread's measured ratio; a restart forgets it.

Run by hand: `PYTHONPATH=. python bench/review15_calibration.py`. Not fixed (see the review
report): in the agent loop the request after an answer is anchored on that answer's own usage,
which limits the damage to plans made without an anchor (after a compaction, on a retry).
"""

from foldwise.compaction import CompactionPolicy
from foldwise.middleware._calibration import Calibration

POLICY = CompactionPolicy(context_window=128_000, reserved_output_tokens=4096)


def main() -> None:
    calibration = Calibration(POLICY)
    for _ in range(20):  # twenty answers: the provider counts 3x the estimate
        calibration.usage("t", measured=30_000, estimated=10_000)
    window = calibration.policy_for("t").context_window
    print(f"20 reports at 3x: scale {calibration.scale('t')}, window {window} (estimate units)")
    calibration.usage("t", measured=1_000, estimated=10_000)  # one odd report (0.1x)
    window = calibration.policy_for("t").context_window or 0
    print(
        f"then one at 0.1x: scale {calibration.scale('t')}, window {window}: a request planned "
        f"to fill it is {window * 3 / 128_000:.1f}x the provider's window"
    )
    print(f"a new process (restart): scale {Calibration(POLICY).scale('t')}")


if __name__ == "__main__":
    main()
