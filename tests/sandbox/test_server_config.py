"""`execrl sandbox serve` takes the one `SandboxConfig`: its flags land in it, its defaults are
the config's, and the backend the server opens is the one the config names."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from execrl.cli import main  # noqa: E402
from execrl.sandbox.config import SandboxConfig  # noqa: E402
from execrl.sandbox.service import server  # noqa: E402
from execrl.sandbox.service.server_config import ServerConfig  # noqa: E402


@pytest.fixture
def started(monkeypatch):
    """The ServerConfig each `execrl sandbox serve` would serve with (nothing is started)."""
    seen: list[ServerConfig] = []
    monkeypatch.setattr(server, "serve", lambda config: seen.append(config) or 0)
    return seen


def test_without_flags_the_server_has_the_configs_defaults(started, monkeypatch):
    monkeypatch.delenv("EXECRL_SANDBOX_TOKEN", raising=False)
    assert main(["sandbox", "serve"]) == 0
    assert started == [ServerConfig()]
    assert started[0].sandbox == SandboxConfig()


def test_the_servers_sandbox_flags_land_in_its_sandbox_config(started, monkeypatch):
    monkeypatch.setenv("EXECRL_SANDBOX_TOKEN", "s3cret")
    argv = ["sandbox", "serve", "--port", "0", "--workers", "3", "--max-retries", "0",
            "--max-queue", "9", "--max-timeout", "30", "--ray", "auto", "--ray-actors", "4",
            "--allow-weaker-sandbox"]  # fmt: skip
    assert main(argv) == 0
    (config,) = started
    assert config.sandbox == SandboxConfig(
        workers=3, max_retries=0, allow_missing_layers=True, backend="ray",
        ray_address="auto", ray_actors=4,
    )  # fmt: skip
    assert (config.port, config.max_queue, config.max_timeout_s, config.token) == (
        0, 9, 30.0, "s3cret"
    )  # fmt: skip


def test_a_bad_count_is_refused_before_anything_starts(started, capsys):
    assert main(["sandbox", "serve", "--max-retries", "-1"]) == 2
    assert "--max-retries must be at least 0" in capsys.readouterr().err
    assert started == []


def test_the_local_backend_is_the_pool_the_sandbox_config_describes():
    config = ServerConfig(sandbox=SandboxConfig(workers=1, max_retries=0), max_queue=3)
    backend = server.make_backend(config)
    try:
        assert backend.sandbox.config == config.sandbox
        assert backend.max_queue == 3
    finally:
        backend.close()


@pytest.mark.slow  # starting Ray takes ~25 s on 2 cores
def test_the_ray_backend_takes_every_sandbox_field_the_server_was_given():
    """--max-retries reached the local pool but not the Ray actors (they retried twice)."""
    pytest.importorskip("ray")
    from execrl.sandbox import Job
    from execrl.tasks.schema import AssertTests

    box = SandboxConfig(workers=1, max_retries=0, backend="ray", ray_address="local", ray_actors=1)
    backend = server.make_backend(ServerConfig(sandbox=box, max_queue=5))
    try:
        assert backend.max_queue == 5
        assert backend._actor_args == (box.workers, box.allow_missing_layers, box.max_retries)
        job = Job(
            "def f():\n    return 1\n", AssertTests("", ("assert f() == 1",)), entry_point="f"
        )
        assert backend.run_many([job])[0].passed
    finally:
        backend.close()


def test_the_data_directories_a_request_may_name_files_in(started, capsys, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    assert main(["sandbox", "serve", "--data-dir", str(one), "--data-dir", str(two)]) == 0
    assert started[-1].data_dirs == (str(one), str(two))
    assert main(["sandbox", "serve", "--data-dir", str(tmp_path / "none")]) == 2
    assert "none: not a directory" in capsys.readouterr().err and len(started) == 1
