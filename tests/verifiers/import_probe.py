"""Imported only by a server that obeys a request naming `tests.verifiers.import_probe:Probe`
(test_server_verify.py): importing it leaves a mark, so the test sees whether it was imported."""

import os
from pathlib import Path

_MARK = os.environ.get("EXECRL_IMPORT_PROBE")
if _MARK:
    Path(_MARK).write_text("imported\n")


class Probe:
    name = "probe"

    def jobs(self, request):
        return []

    def verify(self, request, runs):
        raise AssertionError("never reached: the server must not load this verifier")
