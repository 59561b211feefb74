"""Built-in checkers: how a program's output is judged where plain equality is not the rule.

Each is a pure function run in the trusted parent, named by `Compare.checker`
(`execrl.tasks.schema.CHECKERS`). The general-purpose ones:

- `tokens`: tokens separated by C's whitespace (ASCII, as `scanf` reads them), exactly equal.
- `float`: tokens; a pair of numeric tokens passes if its absolute error is within `atol` or
  its relative error within `rtol` (testlib's `doubleCompare`, problemtools' `float_tolerance`);
  with both zero, numbers must be equal as numbers (`1.0` is `1`). Other tokens exactly. A
  number is what C's strtod reads, in ASCII: not `1_0`, not Arabic-Indic or fullwidth digits.
- `yesno`: tokens; `yes`/`no` in any case (`YES`, `Yes`), every other token exactly.
- `lines_unordered`: the same lines, each stripped, as a multiset (blank lines ignored).

And the rules of three benchmarks' own harnesses, each reproduced from its source:

- `livecodebench` (lcb_runner/evaluation/testing_util.py): stdio output and expected are
  stripped, split on newlines, each line stripped; the line counts must agree; a line passes if
  equal, else if both lines parse as whitespace-separated `Decimal`s and the lists are equal
  (`1.0` == `1`, but `0.1` != `0.10000001`). Call-based: a returned tuple becomes a list, then
  `==`.
- `apps` (APPS eval/testing_util.py, which TACO's copies): stdio goes through APPS' cascade,
  passing at the first rule that holds: the output lines joined equal the expected (both
  stripped, lines stripped or not); the non-empty lines equal the expected's lines stripped;
  every line a number and all within `np.allclose` (rtol 1e-5, atol 1e-8); the set of each
  line's token set equal (line order, repeated lines and token order ignored: APPS's known
  leniency); the same with every token a number rounded to 3 places. Call-based: a tuple
  becomes a list; passes if `==` the expected, or `==` its first element when the expected is
  a non-empty list (APPS wraps outputs once), or a list of tuples equal as lists to it.
- `codecontests` (code_contests execution/tester_sandboxer.cc, `OutputsMatch`): tokens split on
  ASCII whitespace and lowercased; equal lists pass; else the counts must agree, and each pair
  passes if equal as strings or, both numeric, within an absolute 1e-5 (integers too: the
  integer branch there is never reached, every integer also parses as a double).

`program` is not here: a custom checker runs in the sandbox (`execrl.sandbox.grading.custom_checker`);
judged by these functions alone it never passes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from decimal import Decimal
from typing import Any

from execrl.tasks.schema import Compare

# The checkers whose upstream judge is C or C++ read as it does, in ASCII: Python's `\d`,
# `float()` and `str.split()` also take Arabic-Indic or fullwidth digits, `1_0`, and no-break
# or em spaces as separators, which no such judge does.
_ASCII_SPACE = re.compile(r"[ \n\t\r\v]+")  # code_contests' separators
_C_SPACE = re.compile(r"[ \t\n\v\f\r]+")  # C's isspace: scanf's and cin's separators
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# A decimal number as C's strtod reads one (no Python-only forms such as `1_000`).
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.I | re.A
)


def stdout_check(got: str, expected: str, cmp: Compare) -> bool:
    """Whether `got` (a program's whole stdout) passes against `expected` under `cmp.checker`."""
    return _STDIO[cmp.checker](got, expected, cmp)


def value_check(got: Any, expected: Any, cmp: Compare) -> bool:
    """Whether a returned value passes under `cmp.checker` (call-based tests)."""
    rule = _CALL.get(cmp.checker)
    if rule is None:  # a stdio-only checker on call tests: decided by equality, never laxer
        return bool(got == expected)
    return rule(got, expected)


def c_tokens(text: str) -> list[str]:
    """`text` split on C's whitespace, as `scanf("%s")` and `cin >>` read it."""
    return [t for t in _C_SPACE.split(text) if t]


def c_number(token: str) -> float | None:
    """The token's value if C's strtod reads all of it as a number (ASCII only), else None."""
    return float(token) if _NUMBER.fullmatch(token) else None


def _tokens(got: str, expected: str, cmp: Compare) -> bool:
    return c_tokens(got) == c_tokens(expected)


def _float(got: str, expected: str, cmp: Compare) -> bool:
    a, b = c_tokens(got), c_tokens(expected)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        fx, fy = c_number(x), c_number(y)
        if fx is None or fy is None or not (math.isfinite(fx) and math.isfinite(fy)):
            return False
        err = abs(fx - fy)
        if not (fx == fy or err <= cmp.atol or err <= cmp.rtol * abs(fy)):
            return False
    return True


def _yesno(got: str, expected: str, cmp: Compare) -> bool:
    a, b = c_tokens(got), c_tokens(expected)
    lower = _ASCII_LOWER
    return len(a) == len(b) and all(
        x == y or (y.translate(lower) in ("yes", "no") and x.translate(lower) == y.translate(lower))
        for x, y in zip(a, b, strict=True)
    )


def _lines_unordered(got: str, expected: str, cmp: Compare) -> bool:
    def lines(text: str) -> Counter[str]:
        return Counter(line.strip() for line in text.splitlines() if line.strip())

    return lines(got) == lines(expected)


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except Exception:  # noqa: BLE001 - lcb_runner's bare except: not numbers, a wrong answer
        return None


def _livecodebench(got: str, expected: str, cmp: Compare) -> bool:
    a = [line.strip() for line in got.strip().split("\n")]
    b = [line.strip() for line in expected.strip().split("\n")]
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        dx, dy = _decimals(x), _decimals(y)
        if dx is None or dy is None or dx != dy:
            return False
    return True


def _allclose(a: list[float], b: list[float]) -> bool:
    """np.allclose(a, b) for equal-length lists: |a - b| <= 1e-8 + 1e-5 * |b|, infinities equal."""
    return all(x == y or abs(x - y) <= 1e-8 + 1e-5 * abs(y) for x, y in zip(a, b, strict=True))


def _apps(got: str, expected: str, cmp: Compare) -> bool:
    output = got.splitlines()  # APPS captures stdout as a list of lines
    want = expected.strip()
    if "\n".join(output).strip() == want or "\n".join(o.strip() for o in output).strip() == want:
        return True
    if output == [expected]:
        return True
    want_lines = [x.strip() for x in expected.split("\n") if x]  # emptiness checked before strip
    if output == want_lines:
        return True
    output = [o for o in output if o]
    if output == want_lines:
        return True
    try:
        out_f, want_f = [float(o) for o in output], [float(w) for w in want_lines]
        if len(out_f) == len(want_f) and _allclose(out_f, want_f):
            return True
    except ValueError:
        pass
    want_sets = {frozenset(w.split()) for w in want_lines}
    out_sets = {frozenset(o.split()) for o in output if o.split()}
    if out_sets == want_sets:
        return True
    try:
        return {frozenset(round(float(t), 3) for t in s) for s in out_sets} == {
            frozenset(round(float(t), 3) for t in s) for s in want_sets
        }
    except (ValueError, OverflowError):
        return False


def _codecontests(got: str, expected: str, cmp: Compare) -> bool:
    a = [t for t in _ASCII_SPACE.split(got.translate(_ASCII_LOWER)) if t]
    b = [t for t in _ASCII_SPACE.split(expected.translate(_ASCII_LOWER)) if t]
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        fx, fy = c_number(x), c_number(y)
        if fx is None or fy is None:
            if x != y:
                return False
        elif not abs(fx - fy) < 1e-5:  # NaN and inf - inf fail, as there
            return False
    return True


def _program(got: str, expected: str, cmp: Compare) -> bool:
    # A custom checker's verdict comes from its own run in the sandbox; a caller that reaches
    # here skipped that run, and a skipped check is never a pass.
    return False


def _lcb_call(got: Any, expected: Any) -> bool:
    if type(got) is tuple:
        got = list(got)
    return bool(got == expected)


def _apps_call(got: Any, expected: Any) -> bool:
    if type(got) is tuple:
        got = list(got)
    if got == expected:
        return True
    if type(expected) is list and expected:
        if got == expected[0]:
            return True
        if type(got) is list and got and type(got[0]) is tuple:
            return [list(x) for x in got] == expected[0]
    return False


_STDIO = {
    "tokens": _tokens,
    "float": _float,
    "yesno": _yesno,
    "lines_unordered": _lines_unordered,
    "livecodebench": _livecodebench,
    "apps": _apps,
    "codecontests": _codecontests,
    "program": _program,
}
_CALL = {"livecodebench": _lcb_call, "apps": _apps_call}
