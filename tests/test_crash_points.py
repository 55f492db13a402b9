"""The test-only crash points: where they are, and that they kill (or not) as configured."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from foldwise._crash import CRASH_POINTS, parse_crash_at

SRC = Path(__file__).resolve().parents[1] / "src" / "foldwise"
_CALL = re.compile(r"""crash_point\("([a-z.]+)"\)""")


def test_every_named_point_is_in_the_code_and_documented() -> None:
    used: set[str] = set()
    for path in SRC.rglob("*.py"):
        used.update(_CALL.findall(path.read_text(encoding="utf-8")))
    assert used == set(CRASH_POINTS)
    doc = (SRC / "_crash.py").read_text(encoding="utf-8").split('"""')[1]
    assert all(f"`{name}`" in doc for name in CRASH_POINTS)


def test_parse_names_the_point_and_the_hit() -> None:
    assert parse_crash_at("checkpoint.after:3") == ("checkpoint.after", 3)
    assert parse_crash_at("lease.acquire.before") == ("lease.acquire.before", 1)
    with pytest.raises(ValueError, match="unknown crash point 'nowhere'"):
        parse_crash_at("nowhere")
    with pytest.raises(ValueError, match=">= 1"):
        parse_crash_at("checkpoint.after:0")


def _hit_twice(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "from foldwise._crash import crash_point\n"
        "crash_point('transcript.before')\n"
        "print('first', flush=True)\n"
        "crash_point('checkpoint.after')\n"
        "crash_point('transcript.before')\n"
        "print('second', flush=True)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_nth_hit_of_the_named_point_is_a_sigkill(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    env = {"FOLDWISE_TEST_CRASH_AT": "transcript.before:2", "FOLDWISE_TEST_CRASH_MARK": str(mark)}
    done = _hit_twice(env)
    assert done.returncode == -signal.SIGKILL
    assert done.stdout == "first\n"
    assert mark.read_text().startswith("transcript.before:2 ")
    # One crash per mark file: a restarted process with the same settings lives on.
    assert _hit_twice(env).stdout == "first\nsecond\n"


def test_unset_or_unarmed_it_does_nothing(tmp_path: Path) -> None:
    assert _hit_twice({}).stdout == "first\nsecond\n"
    arm = tmp_path / "arm"
    env = {"FOLDWISE_TEST_CRASH_AT": "transcript.before", "FOLDWISE_TEST_CRASH_ARM": str(arm)}
    assert _hit_twice(env).stdout == "first\nsecond\n"
    arm.touch()
    assert _hit_twice(env).returncode == -signal.SIGKILL
