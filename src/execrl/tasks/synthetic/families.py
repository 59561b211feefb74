"""Task families of the synthetic suite. Each family maps (rng, difficulty 1-5) to a `Spec`:
a function name, its arguments, a one-sentence description, the body of the reference, and
an input generator. Difficulty 1 is a one-line, one-operation function with a short prompt;
each level adds operations, arguments, branches or loops; 5 needs a real algorithm."""

from __future__ import annotations

import random
import string
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def word(k: int) -> str:
    return NUMBER_WORDS[k] if 0 <= k < len(NUMBER_WORDS) else str(k)


@dataclass(frozen=True, slots=True)
class Spec:
    name: str
    args: tuple[str, ...]
    description: str  # completes "Write a function NAME(ARGS) that ..."
    body: str  # the reference's body, indented by four spaces per line
    inputs: Callable[[random.Random], tuple[Any, ...]]


# -- input generators ------------------------------------------------------------------------


def ints(lo: int, hi: int, n: int = 1) -> Callable[[random.Random], tuple[Any, ...]]:
    return lambda r: tuple(r.randint(lo, hi) for _ in range(n))


def words(n_max: int = 8) -> Callable[[random.Random], tuple[Any, ...]]:
    return lambda r: ("".join(r.choice("abcdeghilmnorstu") for _ in range(r.randint(0, n_max))),)


def sentence() -> Callable[[random.Random], tuple[Any, ...]]:
    def gen(r: random.Random) -> tuple[Any, ...]:
        ws = ["".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(1, 6)))]
        ws += [
            "".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(1, 6)))
            for _ in range(r.randint(0, 4))
        ]
        return (" ".join(ws),)

    return gen


def int_lists(
    lo: int, hi: int, min_len: int = 0, max_len: int = 8, extra: int = 0
) -> Callable[[random.Random], tuple[Any, ...]]:
    def gen(r: random.Random) -> tuple[Any, ...]:
        xs = [r.randint(lo, hi) for _ in range(r.randint(min_len, max_len))]
        return (xs, *(r.randint(1, 9) for _ in range(extra)))

    return gen


# -- families --------------------------------------------------------------------------------

_OPS = {"+": ("add", "plus"), "-": ("subtract", "minus"), "*": ("times", "times")}


def arithmetic(r: random.Random, d: int) -> Spec:
    op = r.choice(list(_OPS))
    k = r.randint(2, 99)
    if d == 1:
        verb, said = _OPS[op]
        name = f"{verb}_{word(k)}" if op != "*" else f"times_{word(k)}"
        return Spec(name, ("x",), f"returns x {said} {k}", f"    return x {op} {k}", ints(-20, 20))
    b = r.randint(1, 50)
    if d == 2:
        return Spec(
            f"scale_{k}_shift_{b}",
            ("x",),
            f"returns x times {k}, plus {b}",
            f"    return x * {k} + {b}",
            ints(-50, 50),
        )
    c = r.randint(2, 9)
    if d == 3:
        return Spec(
            f"mix_{k}_{c}_{b}",
            ("x", "y"),
            f"returns {k} times x minus {c} times y, plus {b}",
            f"    return {k} * x - {c} * y + {b}",
            ints(-50, 50, 2),
        )
    if d == 4:
        return Spec(
            f"poly_{k}_{c}_{b}",
            ("x", "y"),
            f"returns the square of (x + {c}) minus {k} times the absolute value of y, all modulo {b + 1}",
            f"    return ((x + {c}) ** 2 - {k} * abs(y)) % {b + 1}",
            ints(-99, 99, 2),
        )
    return Spec(
        f"digits_mix_{k}_{c}",
        ("x", "y"),
        f"returns the sum of the decimal digits of abs(x * {c} + y) times {k}, floor-divided by the number of those digits",
        f"    n = abs(x * {c} + y)\n    digits = [int(ch) for ch in str(n)]\n    return sum(digits) * {k} // len(digits)",
        ints(-9999, 9999, 2),
    )


def strings(r: random.Random, d: int) -> Spec:
    if d == 1:
        choice = r.randrange(4)
        if choice == 0:
            t = "".join(r.choice("xyz!?") for _ in range(r.randint(1, 3)))
            return Spec(
                f"append_{'_'.join(str(ord(ch)) for ch in t)}",
                ("s",),
                f"returns s followed by {t!r}",
                f"    return s + {t!r}",
                words(),
            )
        expr, what, name = [
            ("s.upper()", "s in upper case", "shout"),
            ("s[::-1]", "s reversed", "reverse"),
            ("len(s)", "the length of s", "length"),
        ][choice - 1]
        return Spec(name, ("s",), f"returns {what}", f"    return {expr}", words())
    ch = r.choice("aeiou")
    k = r.randint(1, 6)
    if d == 2:
        name, expr, what = r.choice(
            [
                (f"count_{ch}", f"s.count({ch!r})", f"how many times {ch!r} occurs in s"),
                (f"first_{word(k)}", f"s[:{k}]", f"the first {k} characters of s"),
                (f"hide_{ch}", f"s.replace({ch!r}, '*')", f"s with every {ch!r} replaced by '*'"),
            ]
        )
        return Spec(name, ("s",), f"returns {what}", f"    return {expr}", words())
    if d == 3:
        return Spec(
            f"trim_and_tag_{k}",
            ("s",),
            f"returns the last {k} characters of s, reversed, in upper case, with '-' between every two characters",
            f"    return '-'.join(s[-{k}:][::-1].upper())",
            words(10),
        )
    if d == 4:
        return Spec(
            f"title_filter_{ch}_{k}",
            ("s",),
            f"returns the words of s that are longer than {k - 1} characters or contain {ch!r}, each capitalized, joined by single spaces",
            f"    kept = [w.capitalize() for w in s.split() if len(w) >= {k} or {ch!r} in w]\n    return ' '.join(kept)",
            sentence(),
        )
    return Spec(
        f"caesar_{k}",
        ("s",),
        f"returns s with each lowercase letter shifted {k} places forward in the alphabet (wrapping from z to a), other characters unchanged, and then every run of repeated characters collapsed to one",
        f"    out = ''\n    for c in s:\n        if 'a' <= c <= 'z':\n            c = chr((ord(c) - 97 + {k}) % 26 + 97)\n        if not out or out[-1] != c:\n            out += c\n    return out",
        sentence(),
    )


def lists(r: random.Random, d: int) -> Spec:
    k = r.randint(2, 9)
    if d == 1:
        expr, what, name = r.choice(
            [
                ("sum(xs)", "the sum of xs", "total"),
                ("len(xs)", "the length of xs", "count"),
                ("xs[::-1]", "xs reversed", "backwards"),
                ("sorted(xs)", "xs sorted in increasing order", "ordered"),
            ]
        )
        return Spec(name, ("xs",), f"returns {what}", f"    return {expr}", int_lists(-20, 20))
    if d == 2:
        op = r.choice(list(_OPS))
        return Spec(
            f"map_{_OPS[op][0]}_{k}",
            ("xs",),
            f"returns a list of each element of xs {_OPS[op][1]} {k}",
            f"    return [x {op} {k} for x in xs]",
            int_lists(-20, 20),
        )
    if d == 3:
        return Spec(
            f"keep_multiples_{k}",
            ("xs",),
            f"returns the elements of xs divisible by {k}, each squared, in order",
            f"    return [x * x for x in xs if x % {k} == 0]",
            int_lists(-30, 30, max_len=10),
        )
    if d == 4:
        return Spec(
            f"window_max_{k}",
            ("xs",),
            f"returns the largest sum of {k} consecutive elements of xs, or the sum of xs when it has fewer than {k} elements",
            f"    if len(xs) < {k}:\n        return sum(xs)\n    return max(sum(xs[i:i + {k}]) for i in range(len(xs) - {k} + 1))",
            int_lists(-20, 20, max_len=12),
        )
    return Spec(
        f"dedupe_runs_{k}",
        ("xs",),
        f"returns the running totals of xs with duplicates removed (keeping first occurrences), keeping only totals not divisible by {k}",
        f"    seen, out, total = set(), [], 0\n    for x in xs:\n        if x in seen:\n            continue\n        seen.add(x)\n        total += x\n        if total % {k}:\n            out.append(total)\n    return out",
        int_lists(-9, 9, max_len=12),
    )


def conditionals(r: random.Random, d: int) -> Spec:
    k = r.randint(-50, 150) if d == 1 else r.randint(-10, 30)
    if d == 1:
        cmp, said = r.choice([(">", "greater than"), ("<", "less than"), ("==", "equal to")])
        return Spec(
            f"is_{'gt' if cmp == '>' else 'lt' if cmp == '<' else 'eq'}_{abs(k)}{'n' if k < 0 else ''}",
            ("x",),
            f"returns whether x is {said} {k}",
            f"    return x {cmp} {k}",
            ints(k - 5, k + 5),
        )
    a, b = r.sample(["big", "small", "odd", "even", "yes", "no", "hot", "cold"], 2)
    if d == 2:
        return Spec(
            f"label_{a}_{b}_{abs(k)}",
            ("x",),
            f"returns {a!r} if x is at least {k}, otherwise {b!r}",
            f"    return {a!r} if x >= {k} else {b!r}",
            ints(k - 10, k + 10),
        )
    m = r.randint(2, 7)
    if d == 3:
        return Spec(
            f"sign_mod_{m}",
            ("x",),
            f"returns 'zero' when x is 0, x * {m} when x is negative, and x % {m} otherwise",
            f"    if x == 0:\n        return 'zero'\n    elif x < 0:\n        return x * {m}\n    else:\n        return x % {m}",
            ints(-20, 20),
        )
    if d == 4:
        return Spec(
            f"quadrant_{m}",
            ("x", "y"),
            f"returns the quadrant (1-4) of the point (x, y), 0 on an axis, plus {m} when both |x| and |y| exceed {m}",
            f"    if x == 0 or y == 0:\n        q = 0\n    elif x > 0:\n        q = 1 if y > 0 else 4\n    else:\n        q = 2 if y > 0 else 3\n    if abs(x) > {m} and abs(y) > {m}:\n        q += {m}\n    return q",
            ints(-12, 12, 2),
        )
    p = r.choice([x for x in range(2, 8) if x != m])
    return Spec(
        f"fizz_{m}_{p}",
        ("n",),
        f"returns the list for i from 1 to n of {a!r} when i is divisible by both {m} and {p}, {b!r} when divisible by {m} only, the string of i when divisible by {p} only, and i otherwise",
        f"    out = []\n    for i in range(1, n + 1):\n        if i % {m} == 0 and i % {p} == 0:\n            out.append({a!r})\n        elif i % {m} == 0:\n            out.append({b!r})\n        elif i % {p} == 0:\n            out.append(str(i))\n        else:\n            out.append(i)\n    return out",
        ints(0, 30),
    )


def loops(r: random.Random, d: int) -> Spec:
    k = r.randint(2, 9 if d > 1 else 20)
    if d == 1:
        if r.random() < 0.8:
            return Spec(
                f"copies_of_{word(k)}",
                ("n",),
                f"returns a list of n copies of {k}",
                f"    return [{k}] * n",
                ints(0, 6),
            )
        return Spec(
            "sum_below",
            ("n",),
            "returns the sum of the numbers 0 to n - 1",
            "    return sum(range(n))",
            ints(0, 30),
        )
    if d == 2:
        return Spec(
            f"sum_step_{k}",
            ("n",),
            f"returns the sum of every {k}th number from 0 up to and including n",
            f"    return sum(range(0, n + 1, {k}))",
            ints(0, 100),
        )
    if d == 3:
        return Spec(
            f"count_halvings_{k}",
            ("n",),
            f"returns how many times n can be floor-divided by {k} before it becomes 0",
            f"    count = 0\n    while n > 0:\n        n //= {k}\n        count += 1\n    return count",
            ints(0, 10**6),
        )
    if d == 4:
        return Spec(
            f"collatz_{k}",
            ("n",),
            f"returns the number of steps to reach 1 from n, where a step divides an even number by 2 and turns an odd number m into 3 * m + 1, stopping after {k * 20} steps at most",
            f"    steps = 0\n    while n != 1 and steps < {k * 20}:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps",
            ints(1, 500),
        )
    return Spec(
        f"pair_count_{k}",
        ("xs",),
        f"returns how many pairs of positions i < j in xs have xs[i] + xs[j] divisible by {k} and xs[i] < xs[j]",
        f"    count = 0\n    for i in range(len(xs)):\n        for j in range(i + 1, len(xs)):\n            if (xs[i] + xs[j]) % {k} == 0 and xs[i] < xs[j]:\n                count += 1\n    return count",
        int_lists(-20, 20, max_len=10),
    )


def compositions(r: random.Random, d: int) -> Spec:
    """Chains of list steps (map, filter, then an aggregate): d + 1 steps."""
    steps: list[tuple[str, str]] = []
    for _ in range(d):
        k = r.randint(2, 9)
        steps.append(
            r.choice(
                [
                    (f"[x + {k} for x in ys]", f"add {k} to each"),
                    (f"[x * {k} for x in ys]", f"multiply each by {k}"),
                    (f"[x for x in ys if x % {k} != 0]", f"drop those divisible by {k}"),
                    (f"[x for x in ys if x > {k - 5}]", f"keep those greater than {k - 5}"),
                ]
            )
        )
    agg, agg_said = r.choice(
        [
            ("sum(ys)", "return the sum"),
            ("len(ys)", "return how many remain"),
            ("max(ys, default=0)", "return the largest (0 if none remain)"),
        ]
    )
    if d == 1:  # one line: the aggregate of one comprehension
        body = f"    return {agg.replace('ys', steps[0][0].replace('ys', 'xs'), 1)}"
    else:
        body = "    ys = xs\n" + "".join(f"    ys = {e}\n" for e, _ in steps) + f"    return {agg}"
    said = ", then ".join(s for _, s in steps)
    name = f"chain_{zlib.crc32(body.encode()) % 10000:04d}"
    return Spec(
        name,
        ("xs",),
        f"takes the list xs, and in order: {said}; then {agg_said}",
        body,
        int_lists(-10, 10, max_len=8),
    )


FAMILIES: dict[str, Callable[[random.Random, int], Spec]] = {
    "arithmetic": arithmetic,
    "strings": strings,
    "lists": lists,
    "conditionals": conditionals,
    "loops": loops,
    "compositions": compositions,
}
