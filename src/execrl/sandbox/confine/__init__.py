"""What confines a worker and its runs: namespaces and the Linux calls behind them (`isolation`,
`syscalls`), the paths runs cannot see (`hidden_paths`), the memory cgroup (`memcg`).

The lowest wing of the sandbox: it imports no other wing. The worker imports it, so it stays
lean (no third-party modules, nothing loaded that a run does not need)."""
