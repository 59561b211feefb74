"""Where a model comes from, up to a `Policy`: a Hugging Face directory, a hub id from the cache
when offline (`hub`), a LoRA adapter merged into its base (`adapter`), a GGUF file read within
bounds, checked and converted once (`gguf_header`, `gguf_check`, `gguf`), a model known by name
and fetched with `execrl models get` (`known_models`, `registry`), or the embedded default built
here (`default`: a `tiny` architecture trained with the one SFT loop, `sft`); `loading` ties
them together, and `shape` reads a model's dimensions from the same names without loading it.
Imports the `prompting` wing below it, never the engines."""
