"""The trusted parent's side of a run: what a job is (`job`, `limits`, `languages`), and how
what came back is judged (`grade`, `compare`, `checkers`, custom checker programs, a run that
did not end normally) into the records every layer above reads (`verdict`).

Imports the `run` and `confine` wings below it (the harness's constants, plain data), never
the pool or the service."""
