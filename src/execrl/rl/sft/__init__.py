"""Supervised fine-tuning, the warm-up stage before RL (`execrl sft`): its typed config
(`config`), its examples (`data`), the run (`run`) and what the run keeps on disk
(`checkpoint`). The loop itself is the models layer's (`models.loading.sft.train_steps`), which the
embedded default's build runs too; the optimizer and its schedule are `execrl train`'s
(`rl.setup.optimizer_and_schedule`)."""
