"""Built-in checkers (sandbox/grading/checkers.py), one test per kind, each case worked out by hand from
the rule (or the upstream harness's source) it reproduces."""

from __future__ import annotations

import pytest

from execrl.sandbox.grading.compare import stdout_matches, values_equal
from execrl.tasks.schema import Compare


def check(name: str, got: str, expected: str, **kw: float) -> bool:
    return stdout_matches(got, expected, Compare(checker=name, **kw))


def test_token_exact():
    assert check("tokens", "1  2\n3\n", "1 2 3")  # whitespace is not compared
    assert not check("tokens", "1 2", "1 2 3")
    assert not check("tokens", "Yes", "YES")
    assert not check("tokens", "1.0", "1")


def test_float_tolerance_absolute_or_relative():
    # |1.0001 - 1| = 1e-4 <= atol 1e-3
    assert check("float", "1.0001 x", "1 x", atol=1e-3)
    assert not check("float", "1.01", "1", atol=1e-3)
    # relative: |1000.5 - 1000| / 1000 = 5e-4 <= rtol 1e-3, though 0.5 > atol
    assert check("float", "1000.5", "1000", atol=1e-6, rtol=1e-3)
    assert not check("float", "nan", "1", atol=1e9)  # NaN is within no tolerance
    assert not check("float", "1_000", "1000", atol=1)  # Python-only spelling is not a number
    assert check("float", "2.0", "2")  # no tolerance: equal as numbers
    assert not check("float", "abc", "abd", atol=1)


def test_yes_no_any_case_other_tokens_exact():
    assert check("yesno", "yes\nNO 3", "YES\nno 3")
    assert not check("yesno", "Yes Abc", "YES abc")  # only yes/no ignore case
    assert not check("yesno", "yes", "no")


def test_unordered_lines():
    assert check("lines_unordered", "b\n a \n\na\n", "a\na\nb")
    assert not check("lines_unordered", "a\nb\n", "a\na\nb\n")  # a multiset, not a set
    assert not check("lines_unordered", "a b\n", "b a\n")  # tokens within a line keep order


def test_livecodebench_lines_then_decimals():
    assert check("livecodebench", "  3 \n\n", "3")
    assert check("livecodebench", "1.50 2", "1.5 2.0")  # Decimal('1.50') == Decimal('1.5')
    assert not check("livecodebench", "0.3333333", "0.33333333")  # no tolerance
    assert not check("livecodebench", "1\n2", "1 2")  # line counts differ
    assert not check("livecodebench", "a  b", "a b")  # not numbers: lines must be equal
    assert values_equal((0, 1), [0, 1], Compare(checker="livecodebench"))  # tuple as list
    assert not values_equal([[0, 1]], [0, 1], Compare(checker="livecodebench"))


@pytest.mark.parametrize(
    ("got", "expected", "passes"),
    [
        ("3\n", " 3 ", True),  # stripped equality
        ("1\n\n2\n", "1\n2\n", True),  # blank lines dropped
        ("0.333333\n", "0.3333333\n", True),  # one number a line: np.allclose
        ("1 2\n3\n", "3\n2 1\n", True),  # the set of each line's token set: APPS' leniency
        ("1.0001 2\n", "1.0 2\n", True),  # numbers rounded to 3 places
        ("1 2\n", "1 3\n", False),
        ("", "1\n", False),
    ],
)
def test_apps_cascade(got, expected, passes):
    assert check("apps", got, expected) is passes


def test_apps_call_outputs_wrapped_once():
    cmp = Compare(checker="apps")
    assert values_equal(2, [2], cmp)  # APPS stores [2] for a returned 2
    assert values_equal([1, 2], [1, 2], cmp)
    assert values_equal((1, 2), [[1, 2]], cmp)  # tuple as list, then the wrapped form
    assert values_equal([(1, 2)], [[[1, 2]]], cmp)  # a list of tuples as lists
    assert not values_equal(3, [2], cmp)


def test_codecontests_lowercase_tokens_and_absolute_tolerance():
    assert check("codecontests", "YES\n", "yes")
    assert check("codecontests", "3.1415926", "3.14159265")  # |diff| = 5e-8 < 1e-5
    assert not check("codecontests", "3.1415", "3.14159265")  # 9.3e-5 >= 1e-5
    # every integer also parses as a double, so large integers compare within 1e-5 as doubles
    assert check("codecontests", "100000000000000001", "100000000000000000")
    assert not check("codecontests", "1 2", "1")
    assert check("codecontests", "NaN", "nan")  # equal token lists pass before any number
    assert not check("codecontests", "nan", "0")  # |nan - 0| < 1e-5 is false


def test_program_checker_alone_never_passes():
    """A custom checker's verdict comes from its run; compared without it, nothing passes."""
    cmp = Compare(checker="program", checker_source="int main(){return 0;}", checker_language="cpp")
    assert not stdout_matches("42", "42", cmp)


def test_unknown_checker_and_source_without_program_are_errors():
    with pytest.raises(ValueError, match="unknown checker 'fuzzy'"):
        Compare(checker="fuzzy")
    with pytest.raises(ValueError, match="needs checker_source"):
        Compare(checker="program")
    with pytest.raises(ValueError, match="only it takes one"):
        Compare(checker="tokens", checker_source="x")


def test_c_judged_checkers_accept_only_what_the_c_judge_reads():
    """`float` (testlib, problemtools) and `codecontests` judge with ASCII C/C++: a number is
    ASCII digits as strtod reads them, a separator is ASCII whitespace. Python's `\\d`, `float()`
    and `str.split()` read more: Arabic-Indic digits, `1_0`, a no-break space between tokens."""
    arabic_ten, fullwidth_ten = "\u0661\u0660", "\uff11\uff10"
    for name in ("float", "codecontests"):
        for wrong in (arabic_ten, fullwidth_ten, "1_0", "+1_0.0"):
            assert not check(name, wrong, "10", atol=1e-3), (name, wrong)
        assert not check(name, "1\u00a02", "1 2", atol=1e-3), name  # no-break space
        assert not check(name, "1\u20032", "1 2", atol=1e-3), name  # em space
        assert check(name, "10.0000001\r\n2\t", "10 2", atol=1e-3), name  # ASCII forms still pass
    for name in ("tokens", "yesno"):
        assert not check(name, "1\u00a02", "1 2"), name
    # The default comparison's tolerance reads numbers the same way.
    tolerant = Compare(atol=1e-3)
    assert not stdout_matches("1_0", "10", tolerant)
    assert not stdout_matches(arabic_ten, "10", tolerant)
    assert stdout_matches("10.0001", "10", tolerant)
