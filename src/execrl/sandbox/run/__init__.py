"""What runs inside the fork-server worker and its runs: the worker (`python -S -m
execrl.sandbox.run.worker`), the harness next to the candidate, the case server, the channel's
framing (`protocol`) and the plain data that crosses it.

Imports only the `confine` wing below it: every module the worker loads is copied into page
tables on each fork, so nothing here reaches the grading or the service."""
