"""What `execrl sandbox serve` is started with: its own bounds, and the one `SandboxConfig`.

Apart from the server's modules (which need FastAPI), so that the command line takes its
defaults from here without the server extra installed."""

from __future__ import annotations

from dataclasses import dataclass, field

from execrl.sandbox.config import SandboxConfig


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port (printed on stderr)
    # Where the runs go, as everywhere in execrl (the pool's one config, one default per field):
    # workers (per Ray actor), max_retries, allow_missing_layers, backend "local" | "ray" with
    # ray_address and ray_actors. Its `limits` are unused: each request gives its run's
    # limits, bounded by max_timeout_s and max_memory_mb below.
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    max_queue: int = 256  # runs waiting for a worker; beyond it 503 + Retry-After
    max_batch: int = 256  # runs in one /v1/run_batch request
    max_body_bytes: int = 16 << 20  # request body
    max_code_bytes: int = 1 << 20  # one program
    max_stdin_bytes: int = 8 << 20  # stdin of one run (or one test case)
    max_files_bytes: int = 16 << 20  # decoded `files` of one run
    max_timeout_s: float = 120.0  # largest run or compile timeout a request may ask for
    max_memory_mb: int = 8192
    retry_after_s: int = 1
    token: str | None = None  # bearer token; None: no authentication
    # Where a request's `apps:PATH` (any contest loader's file) may lie; (): $EXECRL_DATA_DIR
    data_dirs: tuple[str, ...] = ()
    max_task_sets: int = 8  # benchmark task sets kept loaded (least recently used dropped)
    max_generated_tasks: int = 1000  # the largest `n` of a generated set (synthetic, suites)
    graceful_timeout_s: float = 30.0  # time given to requests in flight at shutdown
