"""A Hugging Face hub id as `from_pretrained` should take it: from the cache when this machine is
offline, and an error that says so at once when the model is not there.

Offline, `from_pretrained` retries the hub for about 50 seconds and ends in a 100-line traceback
about a connection error. Whether the hub answers is known in well under a second (a TCP
connection to its endpoint), so a missing model is one line before anything loads.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_source(name: str) -> tuple[str, bool]:
    """(`name`, whether to load it from the local cache only). Raises FileNotFoundError naming
    the model, why the machine counts as offline and what to do, when it is offline and the
    model is not in the cache."""
    from huggingface_hub import constants, try_to_load_from_cache

    why = offline_reason(constants.HF_HUB_OFFLINE, constants.ENDPOINT)
    if why is None:
        return name, False
    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return name, True  # cached: load it without asking the hub
    raise FileNotFoundError(
        f"model {name!r} is a Hugging Face hub id, but this machine is offline ({why}) and the "
        f"model is not in the cache ({constants.HF_HUB_CACHE}); give a local directory in "
        "Hugging Face format instead (model.path, or --model), made where there is a network "
        f"with `huggingface-cli download {name} --local-dir DIR`, or go online"
    )


def offline_reason(hub_offline: bool, endpoint: str) -> str | None:
    """Why the hub cannot be reached, or None when it can (or a proxy decides: not checked)."""
    if hub_offline or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return "HF_HUB_OFFLINE is set"
    if any(os.environ.get(p) for p in _PROXIES):
        return None
    url = urlsplit(endpoint)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        return f"{host}:{port} cannot be reached: {e.strerror or e}"
    return None
