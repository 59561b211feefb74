"""The layers import one way: tasks -> models -> sandbox -> rewards -> rl -> eval -> report.

Every `import execrl.X` and `from execrl.X import ...` in a layer's modules, at module level or
inside a function, names the same layer or a lower one. Modules outside the layers (the `cli`
package) sit on top.

Inside a layer split into wings (sub-packages), the wings import one way too, in the order
`WINGS` gives; the modules directly in the layer's package (`ROOT`) are a wing of their own.

Outside the sandbox layer, src/ imports the sandbox only through `execrl.sandbox` (its face,
`sandbox/__init__.py`, which sits above the wings it names), never one of its modules."""

from __future__ import annotations

import ast
from pathlib import Path

LAYERS = ["tasks", "models", "sandbox", "rewards", "rl", "eval", "report"]
ROOT = "(root)"
# sandbox: by where the code runs (docs/ARCHITECTURE.md): confinement, the worker and its runs,
# the trusted parent's grading, domain verifiers, the pool (package root), the service.
# rl: by what a training step does (docs/ARCHITECTURE.md), each wing's modules in its __init__.
# models: by what a model is asked, where it comes from and what generates (docs/ARCHITECTURE.md).
# tasks: the records and readers, the generated suites over them, the names over everything.
# rewards: the analyses below the records a reward reads and returns, then the leaves, the
# scoring that composes them and the adapters on top (docs/ARCHITECTURE.md).
WINGS = {
    "tasks": [
        ROOT,  # the task records and each benchmark's reader
        "suites",  # the verifier suites (sql, verilog, chart, web, diagram, testgen, ...)
        "synthetic",  # the procedural suite
        "catalog",  # the benchmarks by name, over all of the above
    ],
    "models": [
        ROOT,  # the process a model runs in: its device, torch's threads, glibc's heap
        "prompting",  # what a model is asked: chat templates, signature prompts
        "loading",  # where a model comes from: files, GGUF, known models, the hub, the default
        "engines",  # what generates: the rollout engines, sampling, vLLM, the engine process
    ],
    "sandbox": ["confine", "run", "grading", "verifiers", ROOT, "service"],
    "rewards": [
        "analysis",  # execution-free analyses of a program: pyflakes, pycodestyle, bandit, ruff
        ROOT,  # what a reward reads (Sample) and returns (RewardResult), the interface (Reward)
        "leaves",  # each one term of a score: execution, syntax, format, style, length, ...
        "scoring",  # combinators, trees from TOML, the scorer and what it applies around a tree
        "adapters",  # TRL's and verl's reward hooks
    ],
    "rl": [
        "files",  # a TOML config into typed records, a checkpoint as data only
        "episodes",  # environments, turn loops, token-exact trajectories, the harness
        "objective",  # log-probs, advantages and the estimators' records, KL, TIS, losses
        "config",  # TrainConfig and its sections, naming the objective's and episodes' choices
        "parallel",  # processes and devices: dist, FSDP and its checkpoints, memory
        "rollout",  # prompts -> scored episodes -> groups
        "update",  # groups -> batches -> the Learner
        ROOT,  # the run loop: set-up, steps, checkpoints, held-out evaluation, metrics
        "sft",  # `execrl sft`, on train's set-up and checkpoints
    ],
}
SRC = Path(__file__).resolve().parents[1] / "src" / "execrl"
# The pool and the service's transport run each job as it is; the runner above them
# (`sandbox/runner.py`) routes each job to a checker, a verifier or first-failure windows, which
# run their jobs on the transport again. A transport importing one of them is the old circle.
TRANSPORT = ["sandbox/pool.py", "sandbox/service/dispatch.py", "sandbox/service/ray_backend.py",
             "sandbox/service/client.py", "sandbox/service/wire.py"]  # fmt: skip
STRATEGIES = ("execrl.sandbox.first_failure", "execrl.sandbox.grading.custom_checker",
              "execrl.sandbox.verifiers", "execrl.sandbox.runner")  # fmt: skip


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
    return [(line, name) for line, name in found if name.startswith("execrl.")]


def _wing(layer: str, parts: list[str]) -> str:
    """The wing of `execrl.<layer>.<parts...>` (a module path or a file's path in the layer)."""
    return parts[0] if len(parts) > 1 and parts[0] in WINGS[layer] else ROOT


def upward_imports(src: Path = SRC) -> list[str]:
    upward = []
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        layer = parts[0]
        if layer not in LAYERS:
            continue
        for line, name in _imports(path):
            where = f"{path.relative_to(src)}:{line}:"
            target = name.split(".")[1:]
            if target[0] in LAYERS and LAYERS.index(target[0]) > LAYERS.index(layer):
                upward.append(f"{where} {layer} imports {name}")
            elif target[0] == layer and layer in WINGS and parts[1:] != ["__init__"]:
                # the layer's face (its __init__) sits above its wings: it names what each
                # exports, for type checkers only, and loads it on first use (tests/sandbox/
                # test_face.py: importing it loads no wing)
                order = WINGS[layer]
                source_wing, target_wing = _wing(layer, parts[1:]), _wing(layer, target[1:] + [""])
                if order.index(target_wing) > order.index(source_wing):
                    upward.append(f"{where} {layer}/{source_wing} imports {name}")
    return upward


def transport_imports(src: Path = SRC) -> list[str]:
    """Each import of a strategy (or the runner) by a transport module: `from execrl.sandbox
    import runner` names it as much as `import execrl.sandbox.runner` does."""
    found = []
    for name in TRANSPORT:
        path = src / name
        if not path.exists():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = (
                    [node.module]
                    if _strategy(node.module)
                    else [f"{node.module}.{a.name}" for a in node.names]
                )
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found.extend(f"{name}:{node.lineno}: {n}" for n in names if _strategy(n))
    return found


def _strategy(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in STRATEGIES)


def face_bypasses(src: Path = SRC) -> list[str]:
    """Each import of a sandbox module other than `execrl.sandbox` itself by a module outside the
    sandbox layer: the layers above take the sandbox's names from its face (`sandbox/__init__.py`)
    so that its wings can move without touching them. `from execrl.sandbox import runner` names
    the module as much as `import execrl.sandbox.runner` does. Tests are not held to it."""
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if rel.parts[0] == "sandbox":
            continue
        tree = ast.parse(path.read_text(), str(path))
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in sorted(imports, key=lambda n: n.lineno):  # ast.walk goes breadth first
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [a.name for a in node.names]
                if node.module == "execrl.sandbox":
                    modules = [f"{node.module}.{n}" for n in names if _sandbox_module(src, n)]
                else:
                    modules = [node.module] if node.module.startswith("execrl.sandbox.") else []
            elif isinstance(node, ast.Import):
                names = ["what it uses"]
                modules = [a.name for a in node.names if a.name.startswith("execrl.sandbox.")]
            else:
                continue  # a relative import stays in its own package
            found.extend(
                f"{rel}:{node.lineno}: imports {m}, inside the sandbox; import "
                f"{', '.join(names)} from execrl.sandbox instead (exported in its _EXPORTS)"
                for m in modules
            )
    return found


def _sandbox_module(src: Path, name: str) -> bool:
    return (src / "sandbox" / f"{name}.py").exists() or (src / "sandbox" / name).is_dir()


def test_no_layer_imports_a_higher_one():
    assert upward_imports() == []


def test_every_wing_is_named_in_the_order():
    for layer, order in WINGS.items():
        wings = {p.name for p in (SRC / layer).iterdir() if (p / "__init__.py").exists()}
        assert wings == set(order) - {ROOT}


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from execrl.report.page import build\n")
    assert _imports(bad) == [(2, "execrl.report.page")]


def test_the_check_sees_a_wing_importing_a_higher_one(tmp_path):
    (tmp_path / "sandbox" / "run").mkdir(parents=True)
    (tmp_path / "sandbox" / "run" / "worker.py").write_text(
        "from execrl.sandbox.confine import isolation\nfrom execrl.sandbox import pool\n"
    )
    (tmp_path / "sandbox" / "pool.py").write_text(
        "from execrl.sandbox.grading.job import Job\nfrom execrl.sandbox.service import wire\n"
    )
    assert upward_imports(tmp_path) == [
        "sandbox/pool.py:2: sandbox/(root) imports execrl.sandbox.service",
        "sandbox/run/worker.py:2: sandbox/run imports execrl.sandbox",
    ]


def test_the_transport_imports_no_strategy():
    assert transport_imports() == []


def test_the_check_sees_a_transport_importing_a_strategy(tmp_path):
    (tmp_path / "sandbox" / "service").mkdir(parents=True)
    (tmp_path / "sandbox" / "pool.py").write_text(
        "from execrl.sandbox.first_failure import run_stopping\n"
        "def f():\n    from execrl.sandbox.verifiers.run import run_verified\n"
    )
    (tmp_path / "sandbox" / "service" / "dispatch.py").write_text(
        "from execrl.sandbox.grading import custom_checker\nfrom execrl.sandbox import pool\n"
    )
    assert transport_imports(tmp_path) == [
        "sandbox/pool.py:1: execrl.sandbox.first_failure",
        "sandbox/pool.py:3: execrl.sandbox.verifiers.run",
        "sandbox/service/dispatch.py:1: execrl.sandbox.grading.custom_checker",
    ]


def test_other_layers_import_the_sandbox_through_its_face():
    bypasses = face_bypasses()
    assert not bypasses, f"{len(bypasses)} imports past execrl.sandbox:\n" + "\n".join(bypasses)


def test_the_check_sees_an_import_past_the_sandbox_face(tmp_path):
    (tmp_path / "sandbox" / "grading").mkdir(parents=True)
    (tmp_path / "sandbox" / "runner.py").write_text("from execrl.sandbox.pool import WorkerPool\n")
    (tmp_path / "rewards").mkdir()
    (tmp_path / "rewards" / "m.py").write_text(
        "from execrl.sandbox import Verdict, runner\n"
        "def f():\n    from execrl.sandbox.grading.verdict import Verdict\n"
        "import execrl.sandbox.grading.job\n"
    )
    assert face_bypasses(tmp_path) == [
        "rewards/m.py:1: imports execrl.sandbox.runner, inside the sandbox; import Verdict, "
        "runner from execrl.sandbox instead (exported in its _EXPORTS)",
        "rewards/m.py:3: imports execrl.sandbox.grading.verdict, inside the sandbox; import "
        "Verdict from execrl.sandbox instead (exported in its _EXPORTS)",
        "rewards/m.py:4: imports execrl.sandbox.grading.job, inside the sandbox; import what it "
        "uses from execrl.sandbox instead (exported in its _EXPORTS)",
    ]
