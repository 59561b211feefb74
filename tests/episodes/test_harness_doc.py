"""Every shell command docs/harness.md shows, run as written (issue 29 item 10).

The commands are read from the doc's text, never copied here, so the test follows the doc when
it changes. What the commands need is laid out as the doc says: `my.toml` (its [env] block),
`my_agent.py` (its complete harness), `examples/` (the repository's), and a tiny model at the
doc's `runs/RUN/final` and as the embedded default. Three departures, each explicit below: the
doc's port 8000 becomes a free one (two test runs at once would collide), `execrl serve-policy`
runs in the background as the doc's "one terminal" (stopped with Ctrl-C's SIGINT at the end),
and `execrl train` gets `--set` options appended that cut the run to one small step. A command
that needs the network (a host other than this one, a package install) is left out, and named.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "harness.md"
SERVER = "execrl serve-policy"
# Appended to the doc's `execrl train` (never replacing its words): one step of 2 x 2 episodes.
SMALL_RUN = ["run.steps=1", "rl.group_size=2", "rl.groups_per_step=2", "data.n_train=4",
             "data.n_heldout=2", "data.heldout_samples=1", "sampling.max_new_tokens=8",
             "sandbox.workers=1", "run.out_dir='runs'", "run.trackers='none'"]  # fmt: skip
NEEDS_NETWORK = re.compile(r"https?://(?!127\.0\.0\.1|localhost)|\bpip install\b")


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def shell_blocks(text: str) -> list[str]:
    """The doc's shell blocks in order: fenced bash/sh/shell ones, and blocks indented by four
    spaces after a blank line outside any fence (Markdown's other code block)."""
    blocks: list[tuple[int, str]] = []
    for m in re.finditer(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.S | re.M):
        blocks.append((m.start(), m.group(1)))
    outside = re.sub(
        r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M
    )
    for m in re.finditer(r"(?:^\n)((?:^    \S.*\n)+)", outside, re.M):
        blocks.append((m.start(1), "".join(line[4:] + "\n" for line in m.group(1).splitlines())))
    return [block for _, block in sorted(blocks)]


def commands(block: str) -> list[str]:
    joined = block.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny_default(tmp_path_factory):
    """A tiny build of the embedded default, with room for the agents' 256-token calls."""
    from execrl.models.loading.default import DefaultRecipe, build_default_model, synthetic_tasks
    from execrl.models.loading.sft import SFTSettings
    from execrl.models.loading.tiny import TinyLlamaShape

    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64,
                             max_positions=2048),
        vocab_size=300, sft=SFTSettings(steps=1, batch_size=4, warmup=1),
    )  # fmt: skip
    return build_default_model(tmp_path_factory.mktemp("default"),
                               synthetic_tasks(0, 16, 1, "train"), recipe, log=lambda m: None)  # fmt: skip


def start_server(command: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """The doc's `execrl serve-policy` line, as in its own terminal (through bash, for the
    variables the line sets); back once it serves."""
    process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in process.stderr], daemon=True).start()
    seen: list[str] = []
    while not any("serving" in line for line in seen):
        try:
            seen.append(lines.get(timeout=120))
        except queue.Empty:
            process.kill()
            raise AssertionError(f"{command}: never said it was serving: {seen}") from None
    return process


@pytest.mark.slow
def test_every_command_docs_harness_shows_runs_as_written(tiny_default, tmp_path):
    text = DOC.read_text()
    [env_block] = [b for b in fenced(text, "toml") if 'name = "harness"' in b]
    [agent] = [b for b in fenced(text, "python") if "EXECRL_TASK_FILE" in b]
    (tmp_path / "my.toml").write_text(env_block)
    (tmp_path / "my_agent.py").write_text(agent)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "runs" / "RUN").mkdir(parents=True)
    (tmp_path / "runs" / "RUN" / "final").symlink_to(tiny_default)
    env = {**os.environ, "EXECRL_DEFAULT_MODEL_DIR": str(tiny_default),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    port = str(free_port())
    servers: list[subprocess.Popen] = []
    ran, left_out = [], []

    def run(script: list[str]) -> None:
        if script:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(script)],
                                  cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)  # fmt: skip
            assert done.returncode == 0, f"{script}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
            ran.append((script, done.stdout))

    try:
        for block in shell_blocks(text):
            script = []
            for line in commands(block):
                line = line.replace("8000", port)
                if NEEDS_NETWORK.search(line):
                    left_out.append(line)
                elif SERVER in line:  # the lines before it in its terminal run first
                    run(script)
                    script = []
                    servers.append(start_server(line, tmp_path, env))
                elif shlex.split(line)[:2] == ["execrl", "train"]:
                    script.append(line + "".join(f" --set {shlex.quote(s)}" for s in SMALL_RUN))
                else:
                    script.append(line)
            run(script)
    finally:
        for process in servers:  # Ctrl-C in the server's terminal
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=60)
    if left_out:  # none today; named, never silently dropped
        warnings.warn(f"docs/harness.md: needs the network, not run: {left_out}", stacklevel=1)
    assert servers and all(p.returncode == 0 for p in servers)
    assert any("execrl train" in " ".join(s) for s, _ in ran)
    recorded = {
        e["episode_id"]: e
        for e in map(json.loads, (tmp_path / "recorded" / "episodes.jsonl").open())
    }
    # The rewriting agent's episode has two segments, as the doc says, and curl showed it.
    assert len(recorded["episode-1"]["segments"]) == 1
    assert len(recorded["episode-2"]["segments"]) == 2
    assert '"episode_id": "episode-2"' in ran[-1][1] or '"episode_id":"episode-2"' in ran[-1][1]


def test_the_bundled_agent_run_by_hand_without_a_task_says_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXECRL_", "OPENAI_"))}
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/e/episode-1/v1"  # never reached
    done = subprocess.run([sys.executable, str(ROOT / "examples/agents/draft_then_rewrite.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("draft_then_rewrite.py: EXECRL_TASK_FILE is not set: ")
    assert "set EXECRL_TASK_FILE to that file (docs/harness.md" in done.stderr
