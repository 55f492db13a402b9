"""Session `coding_zh`: a Chinese-language coding session (reads, tests, edits, a big log).

The user fixes a rounding bug in an invented billing service, adds constraints as the work
goes on, and at one point has the agent dump a large settlement log.
"""

from __future__ import annotations

import random

from langchain_core.messages import BaseMessage

from foldwise.replay.sessions._text import SessionBuilder, fill, pick

__all__ = ["build_coding_zh"]

_SYSTEM = (
    "你是一个编码助手，工作目录是 /repo（Python 3.11 项目 billing-service）。可用工具：read_file、"
    "grep、run_tests、edit_file、bash。修改代码前先读文件，改完必须跑测试。"
)
_FUNCS = ["settle_batch", "apply_fee", "round_amount", "split_refund", "post_ledger", "reconcile"]
_VARS = ["amount", "fee_rate", "currency", "batch_id", "entries", "balance", "refund", "ledger"]
_COMMENTS = [
    "按商户配置计算手续费，费率以万分之一为单位",
    "跨币种结算时先换算成人民币再汇总",
    "退款需要拆分到原始的每一笔入账记录",
    "金额统一保留两位小数，采用银行家舍入",
    "批次结算失败时整体回滚，不允许部分入账",
    "对账差异超过一分钱时写入人工复核队列",
]


def _code_block(rng: random.Random, index: int) -> str:
    func = f"{pick(rng, _FUNCS)}_{index}"
    a, b = rng.sample(_VARS, 2)
    return (
        f"def {func}({a}: Decimal, {b}: Decimal) -> Decimal:\n"
        f'    """{pick(rng, _COMMENTS)}。"""\n'
        f"    # {pick(rng, _COMMENTS)}\n"
        f"    if {a} < 0:\n"
        f'        raise LedgerError(f"{func}: {a} 不能为负数: {{{a}}}")\n'
        f"    result = ({a} * {b}).quantize(CENT, rounding=ROUND_HALF_EVEN)\n"
        f'    logger.info("{func} 完成", extra={{"{a}": str({a}), "result": str(result)}})\n'
        f"    return result\n\n\n"
    )


def _source(rng: random.Random, path: str, chars: int) -> str:
    head = (
        f'"""{path}：结算与入账逻辑。"""\n\nfrom __future__ import annotations\n\n'
        "import logging\nfrom decimal import ROUND_HALF_EVEN, Decimal\n\n"
        "from billing.errors import LedgerError\n\nlogger = logging.getLogger(__name__)\n"
        'CENT = Decimal("0.01")\n\n\n'
    )
    return head + fill(rng, chars - len(head), _code_block)


def _pytest(rng: random.Random, failing: bool, chars: int) -> str:
    lines = [
        "============================= test session starts =============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2",
        "collected 214 items",
        "",
    ]
    body = fill(
        rng,
        chars,
        lambda r, i: (
            f"tests/test_ledger.py::test_{pick(r, _FUNCS)}_{i} PASSED"
            f"{' ' * r.randint(1, 8)}[{min(99, i // 2)}%]\n"
        ),
    )
    tail = (
        "\n=================================== FAILURES ===================================\n"
        "___________________________ test_rounding_half_even ____________________________\n"
        "    def test_rounding_half_even():\n>       assert round_amount(Decimal('2.675')) == "
        "Decimal('2.68')\nE       AssertionError: assert Decimal('2.67') == Decimal('2.68')\n"
        "FAILED tests/test_ledger.py::test_rounding_half_even - AssertionError\n"
        "======================== 1 failed, 213 passed in 4.81s ========================\n"
        if failing
        else "\n======================== 214 passed in 4.62s ========================\n"
    )
    return "\n".join(lines) + body + tail


def _log(rng: random.Random, chars: int) -> str:
    return fill(
        rng,
        chars,
        lambda r, i: (
            f'{{"ts": "2025-11-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:'
            f'{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z", "level": '
            f'"{pick(r, ["INFO", "INFO", "INFO", "WARN", "ERROR"])}", "batch_id": '
            f'"B{r.randint(100000, 999999)}", "merchant": "M{r.randint(1000, 9999)}", '
            f'"amount": "{r.randint(1, 999999) / 100:.2f}", "msg": "{pick(r, _COMMENTS)}"}}\n'
        ),
    )


def _investigate(b: SessionBuilder, rng: random.Random, scale: float) -> None:
    """The failing test, the module and the call sites of `round_amount`."""
    b.tool_round(
        "先看失败的测试和相关代码。",
        [
            (
                "run_tests",
                {"args": "tests/test_ledger.py -q"},
                _pytest(rng, True, int(9000 * scale)),
            ),
            (
                "read_file",
                {"path": "billing/ledger.py"},
                _source(rng, "billing/ledger.py", int(14000 * scale)),
            ),
        ],
    )
    b.tool_round(
        "查一下 round_amount 的所有调用点。",
        [
            (
                "grep",
                {"pattern": "round_amount", "path": "billing"},
                "\n".join(
                    f"billing/{pick(rng, ['ledger', 'fees', 'refunds', 'batch'])}.py:"
                    f"{rng.randint(10, 400)}:    total = round_amount({pick(rng, _VARS)})"
                    for _ in range(40)
                ),
            ),
        ],
    )


def _edit_rounds(b: SessionBuilder, rng: random.Random, scale: float, rounds: int) -> None:
    """`rounds` edit-and-reread rounds, with a test run every fourth."""
    for round_no in range(rounds):
        path = f"billing/{pick(rng, ['ledger', 'fees', 'refunds', 'batch', 'reconcile'])}.py"
        b.tool_round(
            f"修改 {path} 第 {round_no + 1} 处。",
            [
                (
                    "edit_file",
                    {"path": path, "old": "float(amount)", "new": "Decimal(amount)"},
                    f"已修改 {path}：1 处替换。",
                ),
            ],
        )
        b.tool_round(
            "读一下修改后的文件确认上下文。",
            [
                (
                    "read_file",
                    {"path": path},
                    _source(rng, path, int(rng.randint(5000, 11000) * scale)),
                ),
            ],
        )
        if round_no % 4 == 3:
            b.tool_round(
                "跑一遍相关测试。",
                [
                    (
                        "run_tests",
                        {"args": "tests/test_ledger.py -q"},
                        _pytest(rng, round_no < 8, int(7000 * scale)),
                    ),
                ],
            )


def _log_review(b: SessionBuilder, rng: random.Random, scale: float) -> None:
    """The settlement-log check and the closing summary (a 90,000-character log dump)."""
    b.say("测试已全部通过。接下来我看一下结算日志，确认线上是否有同类问题。")
    b.ask("看一下 logs/settlement.log 里上周有没有金额差一分钱的批次。")
    b.tool_round(
        "读取结算日志。",
        [
            ("bash", {"command": "cat logs/settlement.log"}, _log(rng, int(90000 * scale))),
        ],
    )
    b.say(
        "日志里有 17 个批次出现一分钱差异，都发生在 11 月 "
        "3 日之后，和 round_amount 的改动时间一致。"
        "下一步：把这些批次写入人工复核队列。"
    )
    b.ask("好的。最后总结一下你改了哪些文件，确认没有改公共函数签名。")
    b.say(
        "改动的文件：billing/ledger.py、billing/fees.py、billing/refunds.py、billing/batch.py。"
        "所有公共函数签名保持不变，金额全程使用 Decimal，日志改为结构化字段，注释均为中文。"
    )


def build_coding_zh(*, quick: bool = False, seed: int = 3) -> list[BaseMessage]:
    """The session's messages (`quick`: smaller files and log)."""
    rng = random.Random(f"coding-zh:{seed}")
    scale = 0.4 if quick else 1.0
    b = SessionBuilder("cz", _SYSTEM)
    b.ask(
        "帮我修复 billing/ledger.py 里结算金额四舍五入错误的问题，测试 "
        "tests/test_ledger.py::test_roundin"
        "g_half_even 一直失败。要求：不要修改任何公共函数的签名，"
        "新增的注释一律用中文。"
    )
    _investigate(b, rng, scale)
    b.say(
        "原因找到了：round_amount 用 float 计算后再 qu"
        "antize，2.675 在二进制下是 2.67499…，所以舍成了 "
        "2.67。我决定改成全程用 Decimal，因为 float "
        "无法精确表示分。接下来修改 billing/ledger.py。"
    )
    b.ask("可以。另外不要用 float，所有金额一律 Decimal；日志改成结构化日志。")
    _edit_rounds(b, rng, scale, 6 if quick else 14)
    _log_review(b, rng, scale)
    return [m for m in b.messages if isinstance(m, BaseMessage)]
