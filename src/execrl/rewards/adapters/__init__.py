"""execrl's scoring behind other frameworks' reward hooks: TRL's `GRPOTrainer` (`trl_adapter`)
and verl's custom reward function (`verl_adapter`, its rows' ground truth as JSON,
`ground_truth`). The top wing: nothing in execrl imports it."""
