"""The sandbox's forks from the host process run no garbage collection in the child.

A trainer that ran FSDP holds torch process groups in caches after `destroy_process_group`;
a collection in a forked child that frees one waits forever for threads the fork did not copy
(the default test tier hung there: the worker reaper's child, stuck in ~ProcessGroupGloo)."""

from __future__ import annotations

import gc
import os

from execrl.sandbox.confine.isolation import fork_without_collector


def test_a_forked_reaper_never_collects_the_hosts_garbage():
    read_end, write_end = os.pipe()
    assert gc.isenabled()
    pid = fork_without_collector()
    if pid == 0:  # the child: report whether a collection could run here, then leave
        os.write(write_end, b"1" if gc.isenabled() else b"0")
        os._exit(0)
    os.close(write_end)
    enabled_in_child = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert enabled_in_child == b"0"
    assert gc.isenabled()  # the host collects as before
