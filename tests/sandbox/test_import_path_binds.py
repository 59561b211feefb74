"""The host's /tmp and the directories the sandbox hides stay hidden whatever the import path
holds: a script run from /tmp puts "/tmp" first on sys.path, and every path on it used to be
bound back whole into each worker."""

from __future__ import annotations

import os
import sys
import uuid

from execrl.sandbox import Sandbox, Verdict
from execrl.sandbox.confine import hidden_paths
from sandbox_helpers import call_job


def test_the_hosts_tmp_is_never_bound_back_from_the_import_path(monkeypatch, tmp_path):
    marker = f"/tmp/execrl-host-marker-{uuid.uuid4().hex}"
    leak = f"/tmp/execrl-run-leak-{uuid.uuid4().hex}"
    open(marker, "w").close()
    monkeypatch.setattr(sys, "path", ["/tmp", "/", os.getcwd(), *sys.path])
    program = (
        "import os\n"
        "def f(x):\n"
        "    try:\n"
        f"        open({leak!r}, 'w').close()\n"
        "    except OSError:\n"
        "        pass\n"
        f"    return os.path.exists({marker!r})\n"
    )
    try:
        with Sandbox(workers=1) as sandbox:
            result = sandbox.run(call_job(program, [(1,)], [False]))
        assert result.verdict is Verdict.PASSED, (result.verdict, result.message)
        assert not os.path.exists(leak), "a run wrote into the host's /tmp"
    finally:
        for path in (marker, leak):
            if os.path.exists(path):
                os.remove(path)


def test_no_import_path_entry_uncovers_a_private_directory(monkeypatch):
    monkeypatch.setattr(sys, "path", ["/tmp", "/", os.getcwd(), "/root", "/home", *sys.path])
    keep = hidden_paths.default_keep()
    assert "/" not in keep and "/tmp" not in keep
    for private in hidden_paths.private_dirs():  # homes and the working directory
        holders = [k for k in keep if private == k or private.startswith(k.rstrip("/") + "/")]
        assert not holders, f"{holders} would bind {private} back whole"
