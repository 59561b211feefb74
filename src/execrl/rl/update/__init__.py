"""The policy update of a step: the settings it reads of the config (`learner_settings`), the
batches built from scored groups (`batch_builder`; the rows of other segments and of correction
samples, `batch_rows` and `corrections`; [credit]'s rules over the samples' own rows,
`episode_credit`) and the `Learner`'s passes over them (`trainer`)."""
