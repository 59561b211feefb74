"""What one update of the policy minimises, as functions of tensors: the log-probabilities and
entropies of completions under a model (`logprobs`, a chunk of the LM head at a time in
`fused_head`), the advantage estimators (`advantages`) and each one's record (`algorithms`:
`rl.algorithm`), credit across an episode's turns (`credit`), KL to the reference (`kl`),
truncated importance sampling against the engine's log-probs (`tis`) and the policy and value
losses (`losses`). Nothing here reads a config or a run's state."""
