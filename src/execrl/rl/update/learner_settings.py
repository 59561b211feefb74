"""What the policy update reads of a run's config, as one small record made once at set-up.

The batch builder (`rl.update.batch_builder`) and the Learner (`rl.update.trainer`) see these
settings and nothing else of the run: not the model's path, the data, the sandbox or the run
directory. `LearnerSettings.of(config)` makes them from a `TrainConfig`; a caller with its own loop
(a test, a notebook) can build one directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from execrl.rl.config.credit_config import CreditConfig
from execrl.rl.objective.algorithms import Algorithm
from execrl.rl.objective.losses import LossSettings

if TYPE_CHECKING:
    from execrl.rl.config.config import TrainConfig


@dataclass(frozen=True, slots=True)
class LearnerSettings:
    algorithm: Algorithm  # the estimator's record (`rl.objective.algorithms`)
    algorithm_spec: str  # rl.algorithm as the config names it, for messages
    loss: LossSettings  # clip range, KL and entropy coefficients, critic, TIS cap
    loss_agg: str  # the aggregation, "auto" resolved by the record (`algorithms.AGGREGATIONS`)
    max_new_tokens: int  # seq_mean_constant's constant normaliser
    group_size: int  # completions per prompt: the estimators' groups
    micro_batch_size: int  # sequences per forward/backward
    epochs: int  # optimisation passes over each batch
    overlong_filter: bool  # truncated completions are left out of the loss
    temperature: float  # sampling.temperature: log-probs are taken at the sampling temperature
    kl_estimator: str | None  # k1 | k2 | k3; None loads and uses no reference model
    kl_coef: float  # rl.kl_coef: beta
    kl_in_reward: bool  # the KL penalty is in the per-token reward (else in the loss)
    gamma: float  # discount, for an estimator that reads it (GAE)
    lam: float  # GAE lambda
    grad_clip: float  # max global gradient norm; 0: none
    # The behaviour policy is not pi_old (vLLM's kernels, or a stale policy): the update takes
    # the trainer's own log-probs as old, and truncated importance weights (`rl.objective.tis`)
    recompute_old: bool
    # pi_old is the update's own forward, detached: one optimisation pass (rl.epochs = 1) on
    # rollouts of the current weights (rl.max_staleness = 0), so the weights are pi_old's
    # throughout the one optimizer step and no separate no-grad forward is needed for it
    old_from_update: bool
    logprob_head: str  # rl.logprob_head: how log-probs leave the LM head (`rl.objective.logprobs`)
    credit: CreditConfig  # [credit]: which turns and sequences the advantage reaches
    # What a harness's rewritten history trains: "every" segment, the "last", or "mask"
    # (`TrainConfig.segment_training`); the batch builder adds segment rows for "every"
    segment_training: str
    # Rows whose advantage is 0 on every token (a group whose samples all scored alike, a sample
    # that does not count) are left out of the update. With the advantage term the loss's only
    # term (no KL to a reference, no entropy bonus, no critic) such a row adds exactly 0 to the
    # gradient, and the denominator is counted over every row before
    # (`BatchBuilder.denominator`), so the step is the same without its forward and backward:
    # about half a GRPO batch at a pass rate near 0.5. The update's health metrics (entropy,
    # clip fraction, the engine/trainer gap) then cover the rows that trained.
    skips_idle_rows: bool = False
    # The roles of the environment's turns (`EnvKind.roles`): each role's advantages are
    # estimated over its own turns alone, compared within the group with the same role's
    # (`BatchBuilder.build`). (): the whole episode is one
    roles: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: TrainConfig) -> LearnerSettings:
        rl = config.rl
        algorithm = config.algorithm
        return cls(
            algorithm=algorithm,
            algorithm_spec=rl.algorithm,
            loss=LossSettings(
                rl.clip_low,
                rl.clip_high,
                rl.kl_coef if rl.kl_in == "loss" else 0.0,
                rl.entropy_coef,
                rl.vf_coef,
                rl.value_clip,
                rl.tis_cap,
            ),  # fmt: skip
            loss_agg=algorithm.loss_agg if rl.loss_agg == "auto" else rl.loss_agg,
            max_new_tokens=config.sampling.max_new_tokens,
            group_size=rl.group_size,
            micro_batch_size=rl.micro_batch_size,
            epochs=rl.epochs,
            overlong_filter=rl.overlong_filter,
            temperature=config.sampling.temperature,
            kl_estimator=rl.kl_estimator if config.uses_reference else None,
            kl_coef=rl.kl_coef,
            kl_in_reward=rl.kl_in == "reward",
            gamma=rl.gamma,
            lam=rl.lam,
            grad_clip=config.optim.grad_clip,
            recompute_old=config.sampling.engine == "vllm" or rl.max_staleness > 0,
            old_from_update=rl.epochs == 1 and rl.max_staleness == 0,
            logprob_head=rl.logprob_head,
            credit=config.credit,
            segment_training=config.segment_training,
            skips_idle_rows=not config.uses_reference
            and not rl.entropy_coef
            and not algorithm.critic,
            roles=config.env.kind.roles,
        )
