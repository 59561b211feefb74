"""The sandbox as a service: `execrl sandbox serve` (HTTP server, request checks, task sets,
verifiers), its clients, jobs on the wire, streaming dispatch, Ray actors, and `open_sandbox`
(a `SandboxConfig`'s local pool or Ray).

The top wing: it drives the pool (package root) and imports every wing below."""
