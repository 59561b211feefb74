"""How the processes of a run share the model, and what each device holds: torch.distributed
helpers and the replicated strategy (`dist`), FSDP2's shards (`fsdp`) and their checkpoints
(`dist_checkpoint`); the memory per device planned before a run (`memory_plan`, `execrl plan`)
and measured at each step of it (`memory`)."""
