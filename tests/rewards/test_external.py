"""External reward models: a callable, and an HTTP endpoint on the loopback interface."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from execrl.rewards import CallableReward, HttpReward, RewardModelError, build_reward
from execrl.rewards.result import Flag

from .conftest import sample


def length_score(s):
    return len(s.completion) / 100


def test_callable_reward_and_toml_target():
    assert CallableReward(length_score)(sample("x" * 50)).score == 0.5
    reward = build_reward({"type": "callable", "target": f"{__name__}:length_score", "low": 0.0})
    assert reward(sample("x" * 25)).score == 0.25 and reward.bounds[0] == 0.0
    with pytest.raises(RewardModelError, match="finite"):
        CallableReward(lambda s: float("nan"))(sample())


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/broken":
            self.send_response(503)
            self.end_headers()
            return
        if self.path == "/missing":
            self.send_response(404)
            self.end_headers()
            return
        answer = {"score": 1.0 if "return" in (body["program"] or "") else -1.0}
        data = json.dumps(answer if self.path == "/score" else {"nope": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def test_http_reward(server):
    assert HttpReward(f"{server}/score")(sample("def f(x):\n    return x\n")).score == 1.0
    assert HttpReward(f"{server}/score")(sample("x = 1\n")).score == -1.0


def test_http_failures(server):
    r = HttpReward(f"{server}/broken")(sample())
    assert r.masked and Flag.REWARD_MODEL_ERROR in r.flags  # a 5xx is infrastructure
    with pytest.raises(RewardModelError, match="HTTP 404"):
        HttpReward(f"{server}/missing")(sample())
    with pytest.raises(RewardModelError, match="expected a JSON object"):
        HttpReward(f"{server}/bad")(sample())
    down = HttpReward("http://127.0.0.1:9/score", timeout_s=1.0)(sample())  # nothing listens
    assert down.masked and "failed" in down.reason
