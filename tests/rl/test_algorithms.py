"""The `Algorithm` records and their registry: hand-derived unit tests, an estimator of a user's
own module trained with through `execrl train`, and the check that keeps an estimator's
misshapen or non-finite advantages out of the loss."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import torch

from execrl.cli import main
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.objective import advantages as A
from execrl.rl.objective import algorithms
from execrl.rl.objective.algorithms import AdvantageInputs, Algorithm, outcome, register, resolve
from execrl.rl.progress import setup_warnings
from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "algorithms.md"


def doc_example() -> str:
    """The complete example of docs/algorithms.md (its first python block), as a user saves it."""
    return re.search(r"```python\n(.*?)```", DOCS.read_text(), re.S).group(1)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """write(source) -> the name of a new module holding `source`, importable from tmp_path."""
    written = []

    def write(source: str) -> str:
        name = f"user_estimators_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(source)
        written.append(name)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture
def registry():
    """The registry, restored after a test that registers."""
    saved = dict(algorithms.REGISTRY)
    yield algorithms.REGISTRY
    algorithms.REGISTRY.clear()
    algorithms.REGISTRY.update(saved)


def test_the_built_in_records_are_the_docs_table():
    section = DOCS.read_text().split("## The built-in estimators")[1].split("\n## ")[0]
    rows = [
        [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if re.match(r"\| `\w+` \|", line)
    ]
    table = {name: (per_token, group, critic, agg, stats)
             for name, _, per_token, group, critic, agg, stats in rows}  # fmt: skip
    assert list(table) == algorithms.names()
    for name, record in algorithms.REGISTRY.items():
        yes = {True: "yes", False: "no"}
        assert table[name] == (yes[record.per_token], yes[record.group_relative],
                               yes[record.critic], record.loss_agg,
                               yes[record.batch_sums is not None]), name  # fmt: skip


def test_register_takes_a_new_name_and_refuses_a_taken_one(registry):
    mine = Algorithm("mine", outcome(A.rloo), group_relative=True)
    assert register(mine) is mine and register(mine) is mine  # the same record again: no change
    assert resolve("mine") is mine and algorithms.names()[-1] == "mine"
    with pytest.raises(ValueError, match="'mine' is registered already"):
        register(Algorithm("mine", outcome(A.grpo)))
    with pytest.raises(ValueError, match="':' marks module:name"):
        register(Algorithm("a:b", outcome(A.grpo)))
    with pytest.raises(ValueError, match="loss_agg = 'sum'; choose one of token_mean"):
        Algorithm("x", outcome(A.grpo), loss_agg="sum")
    assert algorithms.names(lambda a: a.critic) == ["ppo"]
    assert algorithms.names(lambda a: a.group_relative) == ["grpo", "dr_grpo", "rloo", "mine"]


def _inputs(scores, mask, token_rewards=None, group_size=2) -> AdvantageInputs:
    mask = torch.tensor(mask)
    return AdvantageInputs(
        scores=torch.tensor(scores), valid=torch.ones(len(scores), dtype=torch.bool),
        token_rewards=mask * 0 if token_rewards is None else torch.tensor(token_rewards),
        mask=mask, values=None, group_size=group_size,
    )  # fmt: skip


def test_outcome_puts_each_sequence_advantage_on_its_tokens():
    # RLOO, groups [1, 0] and [0, 1]: r - the other = [1, -1] and [-1, 1]; the last row has no
    # token that counts
    x = _inputs([1.0, 0, 0, 1], [[1.0, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]])
    adv, targets = algorithms.RLOO.advantage(x)
    assert adv.tolist() == [[1, 1, 0], [-1, 0, 0], [-1, -1, -1], [0, 0, 0]] and targets is None


def test_reinforce_pp_sums_of_two_halves_give_the_whole_batch_statistics():
    # returns-to-go: row 0 [1, 1, 1], row 1 [2, 2, -] (its last token masked)
    # sums over the 5 tokens: G 7, G^2 11, n 5: mean 1.4, var 11/5 - 1.96 = 0.24
    rewards, mask = [[0.0, 0, 1], [0, 2, 0]], [[1.0, 1, 1], [1, 1, 0]]
    whole = _inputs([1.0, 2], mask, rewards)
    halves = [_inputs([1.0], [mask[i]], [rewards[i]], group_size=1) for i in (0, 1)]
    sums = [algorithms.REINFORCE_PP.batch_sums(x) for x in halves]
    assert (sums[0] + sums[1]).tolist() == [7.0, 11.0, 5.0]
    adv, _ = algorithms.REINFORCE_PP.advantage(
        AdvantageInputs(**{**_fields(halves[0]), "batch_sums": sums[0] + sums[1]})
    )
    std = 0.24**0.5
    assert torch.allclose(adv, torch.full((1, 3), (1 - 1.4) / std), atol=1e-5)
    alone, _ = algorithms.REINFORCE_PP.advantage(whole)  # one process: the same numbers
    assert torch.allclose(alone[0], adv[0], atol=1e-5)


def _fields(x: AdvantageInputs) -> dict:
    return {name: getattr(x, name) for name in AdvantageInputs.__slots__}


def test_the_docs_example_ranks_each_group_by_hand(user_module):
    raft = __import__(user_module(doc_example())).raft
    # groups of 3: [1, 0.5, 1] -> its two best; [0, 2, 2] with the last masked -> the 2 alone
    got = raft(torch.tensor([1.0, 0.5, 1, 0, 2, 2]), 3, torch.tensor([1, 1, 1, 1, 1, 0]))
    assert got.tolist() == [1, 0, 1, 0, 1, 0]
    assert raft(torch.tensor([1.0, 1]), 2).tolist() == [0, 0]  # all equal: nothing to rank


def test_rl_algorithm_takes_a_record_or_a_function_from_a_users_module(user_module, tmp_path,
                                                                      capsys):  # fmt: skip
    name = user_module(doc_example() + textwrap.dedent("""
        NOT_ONE = 3

        def build():
            return RAFT

        def broken():
            raise RuntimeError("no settings")
    """))  # fmt: skip
    assert resolve(f"{name}:RAFT").name == "raft" and resolve(f"{name}:build").name == "raft"
    assert load_config(None, [f"rl.algorithm='{name}:build'"]).algorithm.loss_agg == "seq_mean"
    refused = {
        "sac": "rl.algorithm = 'sac': choose one of grpo, dr_grpo, rloo, reinforce_pp, ppo, or "
        "module:name",
        "no_such_module_xyz:A": "cannot import no_such_module_xyz .*PYTHONPATH",
        f"{name}:missing": f"{name} has no missing",
        f"{name}:NOT_ONE": "NOT_ONE is a int, not an Algorithm record",
        f"{name}:broken": r"broken\(\) raised RuntimeError: no settings",
        ":x": "expected module:name",
    }
    for spec, message in refused.items():
        with pytest.raises(ConfigError, match=message):
            load_config(None, [f"rl.algorithm='{spec}'"])
    # execrl train: one line, exit status 2, before any model loads (no run directory)
    out = ["--set", f"run.out_dir={str(tmp_path / 'runs')!r}"]
    assert main(["train", "--set", "rl.algorithm='no_such_module_xyz:A'", *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("execrl train: error: --set: rl.algorithm = 'no_such_module_xyz:A'")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_a_records_fields_decide_what_the_config_allows(user_module):
    name = user_module(textwrap.dedent("""
        from execrl.rl.objective.algorithms import REINFORCE_PP, RLOO, Algorithm

        PER_TOKEN = Algorithm("per_token", REINFORCE_PP.advantage, per_token=True)
        GROUPED = Algorithm("grouped", RLOO.advantage, group_relative=True)
    """))  # fmt: skip
    credit = ["reward.token_credit.enabled=true", "reward.tree.type='pass'"]
    one = ["rl.group_size=1", "rl.dynamic_sampling=false"]
    assert load_config(None, [f"rl.algorithm='{name}:PER_TOKEN'", *one, *credit])
    with pytest.raises(ConfigError, match="per-token rewards \\(reinforce_pp or ppo\\)"):
        load_config(None, [f"rl.algorithm='{name}:GROUPED'", *credit])
    with pytest.raises(ConfigError, match="group_size must be at least 2"):
        load_config(None, [f"rl.algorithm='{name}:GROUPED'", "rl.group_size=1"])
    zero = load_config(None, [f"rl.algorithm='{name}:GROUPED'", "sampling.temperature=0"])
    assert "group-relative advantage is zero" in setup_warnings(zero)[0]


def test_an_estimator_from_outside_the_package_trains_through_execrl_train(
    tiny_default_dir, user_module, tmp_path, capsys, monkeypatch
):
    """The docs' RAFT, wrapped to record each call, named in the config as module:function."""
    name = user_module(doc_example() + textwrap.dedent("""
        import dataclasses

        CALLS = []

        def counted():
            def advantage(x):
                out = RAFT.advantage(x)
                CALLS.append((x.scores.clone(), x.valid.clone(), x.mask.clone(), out[0].clone()))
                return out

            return dataclasses.replace(RAFT, advantage=advantage)
    """))  # fmt: skip
    monkeypatch.setenv("EXECRL_DEFAULT_MODEL_DIR", str(tiny_default_dir))
    small = ["data.n_train=4", "data.heldout=''", "run.steps=2", "rl.group_size=2",
             "rl.groups_per_step=2", "rl.dynamic_sampling=false", "sampling.max_new_tokens=8",
             "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}", "run.name='raft'",
             f"rl.algorithm='{name}:counted'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    assert f'algorithm = "{name}:counted"' in (tmp_path / "raft" / "config.toml").read_text()
    rows = [json.loads(r) for r in (tmp_path / "raft" / "metrics.jsonl").read_text().splitlines()]
    calls = sys.modules[name].CALLS
    assert len(calls) == len(rows) == 2
    for scores, valid, mask, adv in calls:  # 1 on every token of a group's best, by hand
        for g in range(0, len(scores), 2):
            pair = [scores[i].item() if valid[i] else None for i in (g, g + 1)]
            for i in (g, g + 1):
                best = None not in pair and pair[0] != pair[1] and scores[i] == max(pair)
                assert adv[i].tolist() == (mask[i] * float(best)).tolist()


BAD = """
import torch

from execrl.rl.objective.algorithms import Algorithm


def per_sequence(x):  # (B, 1): it would reach only each sequence's first token
    return x.scores[:, None] - x.scores.mean() + 1.0, None


def not_finite(x):
    return torch.full_like(x.mask, float("nan")), None


PER_SEQUENCE = Algorithm("per_sequence", per_sequence, group_relative=True)
NOT_FINITE = Algorithm("not_finite", not_finite, group_relative=True)
"""


@pytest.mark.parametrize("record,message", [("PER_SEQUENCE", r"shape \(16, 1\), the batch is "
                                                              r"\(16, \d+\)"),
                                            ("NOT_FINITE", "not all finite")])  # fmt: skip
def test_an_advantage_not_shaped_like_the_batch_never_reaches_the_loss(
    tiny_model_dir, user_module, tmp_path, record, message
):
    name = user_module(BAD)
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=1", "rl.dynamic_sampling=false",
                         f"rl.algorithm='{name}:{record}'")  # fmt: skip
    with pytest.raises(ConfigError, match=f"rl.algorithm = '{name}:{record}': .*{message}"):
        train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
