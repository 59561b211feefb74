"""The report layer: TensorBoard / W&B / MLflow trackers, example completions, plots and the
run report (`report.html`). Above every other layer; only `rl.run` and the CLI import it."""
