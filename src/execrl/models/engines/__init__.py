"""What generates: the rollout engines behind one interface (`engine`; `engine_factory` builds
the one `sampling.engine` names), execrl's sampling loop and Hugging Face `generate`
(`sampling`, over the KV-cache loop `decode` and its lean Llama forward `lean_llama`, the
forward's signature across transformers versions `hf_forward`, the stop rules `stop_rules`),
vLLM (`vllm_engine`), an engine in a process of its own (`remote_engine`, `engine_process`,
`engine_messages`) and the policy's weights pushed to an engine with its own copy (`weights`,
`weight_group`); the text generators of evaluation (`backends`). The top wing: it loads models
with `loading` and asks them with `prompting`."""
