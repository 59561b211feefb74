"""The typed config of `execrl train` (`config`: `TrainConfig`, read from TOML by `rl.files`'s
`toml_config`) and the sections kept apart with their checks: `[data]` (`data_config`) and its
task mixes and curricula (`curriculum`), `[credit]` (`credit_config`) and `[dist]`
(`dist_config`). It names the objective's choices (estimators, log-prob heads) and the episodes'
environments; nothing below it reads a `TrainConfig`."""
