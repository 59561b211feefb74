"""The synthetic suite: seeded, disjoint splits, a real difficulty gradient, and references
that pass their own tests in the sandbox."""

from __future__ import annotations

import re

import pytest

from execrl.sandbox import Job, Sandbox
from execrl.tasks import load_benchmark
from execrl.tasks.schema import CallTests
from execrl.tasks.synthetic import generate, identity, split_of
from execrl.tasks.synthetic.families import FAMILIES


def test_same_seed_same_tasks_and_a_stream_of_fresh_ones():
    a = generate(seed=3, n=40, difficulty=2)
    assert a == generate(seed=3, n=40, difficulty=2)
    assert generate(seed=3, n=80, difficulty=2)[:40] == a  # more tasks extend, never reshuffle
    b = generate(seed=4, n=40, difficulty=2)
    assert [t.id for t in a] != [t.id for t in b]
    assert len({t.id for t in a}) == 40


def test_train_and_test_never_share_a_task():
    for d in (1, 3, 5):
        train = generate(seed=0, n=300, difficulty=d, split="train")
        test = generate(seed=1, n=60, difficulty=d, split="test")
        assert not {t.id for t in train} & {t.id for t in test}
        # the same function under another name is the same task: identity ignores names
        assert not {t.reference.split("\n", 1)[1] for t in train} & {
            t.reference.split("\n", 1)[1] for t in test
        }


def test_split_is_a_function_of_the_task_alone():
    import random

    spec = FAMILIES["arithmetic"](random.Random(1), 1)
    ident = identity("arithmetic", spec)
    assert split_of(ident) == split_of(identity("arithmetic", spec))
    assert {t.metadata["split"] for t in generate(0, 50, 1, "test")} == {"test"}


def test_easy_end_is_very_easy_and_hard_end_is_not():
    easy = generate(seed=0, n=100, difficulty=1)
    hard = generate(seed=0, n=100, difficulty=5)
    body_lines = lambda ts: sum(t.reference.count("\n") - 1 for t in ts) / len(ts)  # noqa: E731
    assert max(len(t.prompt) for t in easy if t.metadata["family"] != "compositions") < 90
    assert sum(t.reference.count("\n") == 2 for t in easy) >= 90  # def line + one return line
    assert body_lines(hard) > 3 * body_lines(easy)
    assert any(re.fullmatch(r"def add_\w+\(x\):\n    return x \+ \d+\n", t.reference) for t in easy)
    assert {t.metadata["family"] for t in easy} == set(FAMILIES)


def test_visible_and_hidden_tests_are_apart():
    for t in generate(seed=0, n=60, difficulty=None):
        assert isinstance(t.tests, CallTests) and isinstance(t.visible_tests, CallTests)
        assert len(t.visible_tests) == 3 and len(t.tests) >= 3
        assert not set(map(repr, t.visible_tests.inputs)) & set(map(repr, t.tests.inputs))


def test_references_pass_in_the_sandbox_and_a_wrong_answer_fails():
    tasks = generate(seed=0, n=60, difficulty=None)
    with Sandbox(workers=2) as sb:
        results = sb.run_many([Job(t.reference, t.tests, t.entry_point) for t in tasks])
        assert [r.verdict.value for r in results] == ["PASSED"] * len(tasks)
        t = tasks[0]
        wrong = t.reference.replace("return", "return 1 +", 1) if "return" in t.reference else ""
        assert not sb.run_many([Job(wrong, t.tests, t.entry_point)])[0].passed


def test_options_by_name():
    tasks = load_benchmark("synthetic:split=test,difficulty=1,n=200,seed=0")
    assert len(tasks) == 200 and all(t.metadata["split"] == "test" for t in tasks)
    mixed = load_benchmark("synthetic:n=50,difficulty=mixed,families=loops+lists")
    assert {t.metadata["family"] for t in mixed} == {"loops", "lists"}
    assert len({t.metadata["difficulty"] for t in mixed}) > 2
    for bad, msg in [
        ("n=x", "invalid literal"),
        ("colour=red", "bad option"),
        ("split=dev", "split must be"),
        ("difficulty=9", "difficulty must be"),
        ("families=maths", "unknown family"),
    ]:
        with pytest.raises(ValueError, match=msg):
            load_benchmark(f"synthetic:{bad}")
    with pytest.raises(ValueError, match="found only"):
        generate(seed=0, n=10_000, difficulty=1, families=("loops",))
