"""The synthetic suite: seeded, procedurally generated Python function-writing tasks.

    generate(seed=0, n=100, difficulty=1, split="train")          # Python API
    load_benchmark("synthetic:split=test,difficulty=1,n=200,seed=0")  # by name

Families: arithmetic, strings, lists, conditionals, loops, compositions (`families.py`), each
with difficulty 1 (one operation, e.g. `def add_three(x):\\n    return x + 3`) to 5 (loops,
branches, several steps). Tasks are `call` tests with 3 visible and up to 10 hidden inputs.

A task's identity is its family, arguments and reference body (not its name or the seed), and
its split is a hash of that identity, so the train and test splits can never share a task, and
any seed streams fresh tasks until a family's space at that difficulty is used up.
"""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

from execrl.tasks.schema import CallTests, Task
from execrl.tasks.synthetic.families import FAMILIES, Spec

SPLITS = ("train", "test")
TEST_FRACTION = 5  # one task identity in 5 is held out for test
N_VISIBLE, N_HIDDEN = 3, 10
MAX_DIFFICULTY = 5
GIVE_UP_AFTER = 20_000


def identity(family: str, spec: Spec) -> str:
    return hashlib.sha256(f"{family}\0{spec.args}\0{spec.body}".encode()).hexdigest()


def split_of(ident: str) -> str:
    return "test" if int(ident[:8], 16) % TEST_FRACTION == 0 else "train"


def reference(spec: Spec) -> str:
    return f"def {spec.name}({', '.join(spec.args)}):\n{spec.body}\n"


def prompt(spec: Spec) -> str:
    return f"Write a function {spec.name}({', '.join(spec.args)}) that {spec.description}."


def _tests(spec: Spec, ident: str) -> tuple[CallTests, CallTests] | None:
    """Visible and hidden tests: distinct inputs, expected values from the reference."""
    ns: dict[str, Any] = {}
    exec(reference(spec), ns)  # our own generated code, not a candidate's
    fn = ns[spec.name]
    rng = random.Random(ident)  # the same task has the same tests whatever the seed
    seen: dict[str, tuple[tuple[Any, ...], Any]] = {}
    for _ in range(60):
        args = spec.inputs(rng)
        if repr(args) in seen:
            continue
        try:
            seen[repr(args)] = (args, fn(*copy.deepcopy(args)))
        except Exception:  # noqa: BLE001 - an input outside the function's domain
            continue
        if len(seen) == N_VISIBLE + N_HIDDEN:
            break
    pairs = list(seen.values())
    if len(pairs) < N_VISIBLE + 3:
        return None
    vis, hid = pairs[:N_VISIBLE], pairs[N_VISIBLE:]
    make = lambda ps: CallTests(tuple(a for a, _ in ps), tuple(e for _, e in ps))  # noqa: E731
    return make(vis), make(hid)


def generate(
    seed: int = 0,
    n: int = 100,
    difficulty: int | None = 1,
    split: str = "train",
    families: tuple[str, ...] | None = None,
) -> list[Task]:
    """`n` distinct tasks of `split`; `difficulty` None draws 1-5 for each task."""
    if split not in SPLITS:
        raise ValueError(f"synthetic: split must be one of {SPLITS}, got {split!r}")
    if difficulty is not None and not 1 <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"synthetic: difficulty must be 1-{MAX_DIFFICULTY}, got {difficulty}")
    names = families or tuple(FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"synthetic: unknown family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    rng = random.Random(f"execrl-synthetic-{seed}")
    tasks: list[Task] = []
    seen: set[str] = set()
    misses = 0  # draws in a row that gave no new task: the space is used up
    while misses < GIVE_UP_AFTER:
        if len(tasks) == n:
            return tasks
        misses += 1
        family = rng.choice(names)
        d = difficulty or rng.randint(1, MAX_DIFFICULTY)
        spec = FAMILIES[family](rng, d)
        ident = identity(family, spec)
        if ident in seen or split_of(ident) != split:
            continue
        seen.add(ident)
        tests = _tests(spec, ident)
        if tests is None:
            continue
        misses = 0
        visible, hidden = tests
        tasks.append(
            Task(
                id=f"synthetic/{family}/{d}/{ident[:12]}",
                prompt=prompt(spec),
                tests=hidden,
                visible_tests=visible,
                entry_point=spec.name,
                reference=reference(spec),
                metadata={"source": "synthetic", "family": family, "difficulty": d, "split": split},
            )
        )
    raise ValueError(
        f"synthetic: found only {len(tasks)} distinct {split} tasks of difficulty {difficulty} "
        f"in families {', '.join(names)}; ask for fewer, or widen the difficulty or families"
    )


def load_synthetic(options: str) -> list[Task]:
    """Tasks from an option string such as "split=test,difficulty=1,n=200,seed=0"
    (difficulty=mixed draws 1-5; families=arithmetic+lists)."""
    opts: dict[str, Any] = {"seed": 0, "n": 100, "difficulty": 1, "split": "train"}
    for part in filter(None, options.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in ("seed", "n", "difficulty", "split", "families"):
            raise ValueError(
                f"synthetic: bad option {part!r}; use seed=, n=, difficulty=, split=, families="
            )
        opts[key] = value
    try:
        seed, n = int(opts["seed"]), int(opts["n"])
        difficulty = None if opts["difficulty"] == "mixed" else int(opts["difficulty"])
    except ValueError as exc:
        raise ValueError(f"synthetic: {exc}") from None
    fams = tuple(opts["families"].split("+")) if "families" in opts else None
    return generate(seed, n, difficulty, opts["split"], fams)
