"""The leaves of a reward tree, each one term of a score: execution (`execution`, a domain
verifier's `verifier`), the program's form (`syntax`, `format`, over the code extracted from a
completion, `extract`), the execution-free penalties (`static_analysis`, `style`, `security`,
sharing `analysis_leaf`), length (`length`) and external reward models (`external`). Each reads a
`Sample` and returns a `RewardResult` (the package root); none composes another."""
