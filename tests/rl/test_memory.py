"""Per-step memory telemetry: resident memory that the step grew shows in the row."""

import torch

from execrl.rl.parallel.memory import memory_metrics


def test_resident_memory_follows_what_the_process_holds():
    before = memory_metrics(torch.device("cpu"))
    held = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB, touched so it is resident
    after = memory_metrics(torch.device("cpu"))
    assert after["mem/rss_gib"] - before["mem/rss_gib"] > 0.05
    assert after["mem/peak_rss_gib"] >= after["mem/rss_gib"] - 1e-3
    assert "mem/device_peak_gib" not in after  # no GPU figure for a CPU run
    del held
