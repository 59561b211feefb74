"""Files handed to a run, read without surprises: a TOML config into its typed records, checked
against their type hints (`toml_config`, whose `ConfigError` every check raises), and a checkpoint
or a batch gathered ahead loaded as data only, never code (`safe_load`). The lowest of rl's wings:
it imports none of them."""
