"""The OpenAI-compatible policy server: calls over HTTP, recorded token-exactly per episode.

A scripted policy (conftest) answers fixed texts with log-probability -0.25 per token, so every
recorded id, mask and log-probability below is derived by hand from the tokenizer."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import torch

from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.rl.episodes.policy_server import PolicyServer, ServeSettings
from execrl.rl.episodes.recorder import Recorder

from .conftest import LOGPROB, ScriptedPolicy
from .test_trajectory import APPEND_ONLY, chat_tokenizer

PROMPT = "Write add(a, b)."
FIRST = "def add(a, b):\n    return a - b\n"
SECOND = "def add(a, b):\n    return a + b\n"
CHECK = "Check it."
RUN_SAMPLING = SamplingParams(temperature=0.7, max_new_tokens=32)


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def bearer(key: str) -> dict:
    """The header an OpenAI client sends with OPENAI_API_KEY=key."""
    return {"Authorization": f"Bearer {key}"}


def get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def serve(tokenizer, turns: list[str], *, chat: bool = True, strict: bool = True, **settings):
    policy = ScriptedPolicy(tokenizer, turns)
    recorder = Recorder(tokenizer, strict=strict)
    options = {"chat": chat, "sampling": RUN_SAMPLING, "fixed_sampling": True, **settings}
    return policy, recorder, PolicyServer(policy, tokenizer, ServeSettings(**options), recorder)


def messages(*texts: str) -> list[dict]:
    """user, assistant, user, ... in turn."""
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


@pytest.fixture
def chat_tok(tokenizer):
    return chat_tokenizer(tokenizer, APPEND_ONLY)


def test_two_chat_calls_record_one_token_exact_trajectory(chat_tok):
    policy, recorder, server = serve(chat_tok, [FIRST, SECOND])
    key = recorder.open("ep1")
    with server:
        url = server.url + "/e/ep1/v1/chat/completions"
        status, one = post(url, {"model": "x", "messages": messages(PROMPT)}, bearer(key))
        assert status == 200 and one["choices"][0]["message"]["content"] == FIRST
        status, two = post(
            url, {"model": "x", "messages": messages(PROMPT, FIRST, CHECK)}, bearer(key)
        )
        assert status == 200 and two["choices"][0]["message"]["content"] == SECOND
    [segment] = recorder.close("ep1").trajectories(final_reward=1.0)
    # by hand: the first prompt is the template's rendering; the second call adds only the
    # text after "<prompt turn><FIRST as sampled, eos included>", encoded on its own
    text1 = f"<user>{PROMPT}{chat_tok.eos_token}\n<assistant>"
    prompt = chat_tok(text1, add_special_tokens=False)["input_ids"]
    first, second = policy.ids(FIRST), policy.ids(SECOND)
    added = chat_tok.encode(f"\n<user>{CHECK}{chat_tok.eos_token}\n<assistant>",
                            add_special_tokens=False)  # fmt: skip
    assert segment.token_ids == tuple(prompt + first + added + second)
    assert segment.loss_mask == tuple(
        [0] * len(prompt) + [1] * len(first) + [0] * len(added) + [1] * len(second)
    )
    assert segment.logprobs == tuple(
        [0.0] * len(prompt) + [LOGPROB] * len(first) + [0.0] * len(added) + [LOGPROB] * len(second)
    )
    b = len(prompt) + len(first)
    assert segment.turn_spans == ((len(prompt), b), (b + len(added), b + len(added) + len(second)))
    assert segment.turn_rewards == (0.0, 1.0) and segment.prompt_length == len(prompt)
    # each call's prompt ids extend the previous call's ids + completion: never re-tokenised
    assert policy.seen == [[prompt], [prompt + first + added]]
    assert one["execrl"] == {"episode_id": "ep1", "call": 0, "segment": 0, "extends": "new"}
    assert two["execrl"]["extends"] == "exact"
    assert two["usage"] == {"prompt_tokens": b + len(added), "completion_tokens": len(second),
                            "total_tokens": b + len(added) + len(second)}  # fmt: skip


def test_a_rewritten_history_starts_a_new_segment(chat_tok):
    policy, recorder, server = serve(chat_tok, [FIRST, SECOND])
    key = recorder.open("ep")
    with server:
        url = server.url + "/e/ep/v1/chat/completions"
        post(url, {"messages": messages(PROMPT)}, bearer(key))
        # the harness drops its first answer: the text no longer extends the conversation
        _, two = post(url, {"messages": messages(PROMPT + "\n" + CHECK)}, bearer(key))
    assert two["execrl"] == {"episode_id": "ep", "call": 1, "segment": 1, "extends": "new"}
    first, second = recorder.close("ep").trajectories(final_reward=1.0)
    rendered = f"<user>{PROMPT}\n{CHECK}{chat_tok.eos_token}\n<assistant>"
    fresh = chat_tok(rendered, add_special_tokens=False)["input_ids"]
    assert policy.seen[1] == [fresh]  # encoded from scratch, as its own sequence
    assert second.token_ids == tuple(fresh + policy.ids(SECOND))
    assert first.turn_rewards == (0.0,) and second.turn_rewards == (1.0,)  # the last call's


def test_a_forged_assistant_turn_is_never_a_policy_token(chat_tok):
    """A harness that puts words in the model's mouth (an assistant message the engine never
    sampled, or its real answer edited) gets them masked 0: only sampled ids carry the loss."""
    policy, recorder, server = serve(chat_tok, [FIRST, SECOND])
    key = recorder.open("ep")
    forged = "def add(a, b):\n    return a + b  # forged\n"
    with server:
        url = server.url + "/e/ep/v1/chat/completions"
        post(url, {"messages": messages(PROMPT, forged, CHECK)}, bearer(key))
        post(
            url,
            {"messages": messages(PROMPT, forged, CHECK, FIRST + "# edited\n", CHECK)},
            bearer(key),
        )
    segments = recorder.close("ep").trajectories(final_reward=0.0)
    sampled = [policy.ids(FIRST), policy.ids(SECOND)]
    for segment, ids in zip(segments, sampled, strict=True):
        policy_tokens = [t for t, m in zip(segment.token_ids, segment.loss_mask, strict=True) if m]
        assert policy_tokens == ids  # exactly the engine's ids, nothing the harness wrote
    assert len(segments) == 2  # the edited answer does not extend the first conversation


def test_an_episode_is_reached_by_its_key_never_by_its_id(chat_tok):
    """A strict recorder (training) records a call into the episode whose key it carries, and
    nowhere else: a call naming another episode's id (path, header, `user`) with its own key,
    or with no key at all, is refused, nothing is generated, and neither is another episode's
    recording read. Ids are not secrets; keys are."""
    policy, recorder, server = serve(chat_tok, [FIRST, SECOND])
    mine, theirs = recorder.open("mine"), recorder.open("theirs")
    body = {"messages": messages(PROMPT)}
    with server:
        status, answer = post(server.url + "/e/theirs/v1/chat/completions", body, bearer(mine))
        assert status == 403 and "cannot call into 'theirs'" in answer["error"]["message"]
        assert post(server.url + "/v1/chat/completions", body,
                    {**bearer(mine), "X-Episode-Id": "theirs"})[0] == 403  # fmt: skip
        assert post(server.url + "/v1/chat/completions", {**body, "user": "theirs"},
                    bearer(mine))[0] == 403  # fmt: skip
        for headers in ({}, bearer("execrl-local"), bearer(mine[:-1]), bearer("\u00e9")):
            assert post(server.url + "/e/theirs/v1/chat/completions", body, headers)[0] == 401
        assert get(server.url + "/episodes/theirs", bearer(mine))[0] == 401
        assert get(server.url + "/episodes/theirs")[0] == 401
        assert get(server.url + "/episodes/theirs", bearer(theirs))[0] == 200
    assert policy.seen == []  # refused before anything was generated
    assert recorder.close("theirs").calls == [] and recorder.close("mine").refusals


def test_with_a_token_only_its_holder_calls_and_an_episode_s_key_alone_extends_it(chat_tok):
    """`execrl serve-policy` took any local caller into any episode (no authentication,
    episodes opened on first use). With a token: a call without it is refused; the token's
    holder names episodes (opened on first use); an episode opened for a harness
    (`POST /episodes`) takes calls with its key only: not the token's, not another key's, not
    by naming its id; and its recording is read with its key or the token only."""
    _, recorder, server = serve(chat_tok, [FIRST] * 4, strict=False)
    server.token = "the-token"
    body = {"messages": messages(PROMPT)}
    with server:
        chat = server.url + "/e/{}/v1/chat/completions"
        for headers in ({}, bearer("wrong"), bearer("the-toke"), bearer("th\u00e9-token")):
            assert post(chat.format("ep"), body, headers)[0] == 401
        assert post(server.url + "/episodes", {})[0] == 401
        assert post(chat.format("ep"), body, bearer("the-token"))[0] == 200
        status, mine = post(server.url + "/episodes", {}, bearer("the-token"))
        _, theirs = post(server.url + "/episodes", {}, bearer("the-token"))
        assert status == 200 and mine["key"] != theirs["key"]
        assert mine["base_url"] == server.url + f"/e/{mine['episode_id']}/v1"
        own, other = bearer(mine["key"]), bearer(theirs["key"])
        assert post(mine["base_url"] + "/chat/completions", body, own)[0] == 200
        assert post(mine["base_url"] + "/chat/completions", body, bearer("the-token"))[0] == 403
        assert post(mine["base_url"] + "/chat/completions", body, other)[0] == 403
        assert post(server.url + "/v1/chat/completions",
                    {**body, "user": mine["episode_id"]}, other)[0] == 403  # fmt: skip
        assert post(chat.format("ep"), body, own)[0] == 403  # a key stays in its episode
        assert get(server.url + f"/episodes/{mine['episode_id']}", other)[0] == 401
        assert get(server.url + f"/episodes/{mine['episode_id']}", own)[1]["calls"] == 1
        assert get(server.url + "/episodes/ep", bearer("the-token"))[1]["calls"] == 1
        assert get(server.url + "/health")[0] == 200


def test_the_episode_id_comes_from_the_path_then_the_header_then_user(chat_tok):
    _, recorder, server = serve(chat_tok, [FIRST] * 3, strict=False)
    with server:
        post(server.url + "/e/a/v1/chat/completions", {"messages": messages(PROMPT), "user": "c"},
             {"X-Episode-Id": "b"})  # fmt: skip
        post(server.url + "/v1/chat/completions", {"messages": messages(PROMPT), "user": "c"},
             {"X-Episode-Id": "b"})  # fmt: skip
        post(server.url + "/v1/chat/completions", {"messages": messages(PROMPT), "user": "c"})
        status, shown = get(server.url + "/episodes/b")
    assert sorted(recorder.episode_ids()) == ["a", "b", "c"]
    assert status == 200 and shown["calls"] == 1 and len(shown["segments"]) == 1


def test_training_fixes_the_temperature_and_caps_the_budget(chat_tok):
    policy, recorder, server = serve(chat_tok, [FIRST])
    key = recorder.open("ep")
    with server:
        post(server.url + "/e/ep/v1/chat/completions",
             {"messages": messages(PROMPT), "temperature": 0.0, "max_tokens": 999}, bearer(key))  # fmt: skip
    [call] = recorder.close("ep").calls
    assert call.temperature == 0.7  # the run's: the loss needs log pi at its temperature


def test_raw_completions_extend_the_prompt_text(tokenizer):
    """/v1/completions (and chat without a template) is raw text: the prompt, then the answer
    as the harness saw it (no eos text), then what the harness adds."""
    policy, recorder, server = serve(tokenizer, [FIRST, SECOND], chat=False)
    key = recorder.open("ep")
    with server:
        url = server.url + "/e/ep/v1/completions"
        _, one = post(url, {"prompt": PROMPT}, bearer(key))
        assert one["object"] == "text_completion" and one["choices"][0]["text"] == FIRST
        post(url, {"prompt": PROMPT + FIRST + CHECK}, bearer(key))
    [segment] = recorder.close("ep").trajectories(final_reward=0.0)
    prompt = tokenizer(PROMPT)["input_ids"]
    added = tokenizer.encode(CHECK, add_special_tokens=False)
    assert policy.seen[1] == [prompt + policy.ids(FIRST) + added]
    assert segment.token_ids == tuple(prompt + policy.ids(FIRST) + added + policy.ids(SECOND))


def test_streaming_models_and_refusals(chat_tok):
    _, _, server = serve(chat_tok, [FIRST], strict=False)
    with server:
        request = urllib.request.Request(
            server.url + "/v1/chat/completions",
            json.dumps(
                {
                    "messages": messages(PROMPT),
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
            ).encode(),  # fmt: skip
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            events = [line for line in response.read().decode().split("\n\n") if line]
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
        assert chunks[0]["choices"][0]["delta"]["content"] == FIRST
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
        assert get(server.url + "/v1/models")[1]["data"][0]["id"] == "policy"
        url = server.url + "/v1/chat/completions"
        for body, said in [
            ({"messages": messages(PROMPT), "n": 2}, "n must be 1"),
            ({"messages": messages(PROMPT), "tools": [{"type": "function"}]}, "tool calls"),
            ({"messages": []}, "non-empty list"),
            ({"messages": messages(PROMPT), "max_tokens": 0}, "positive integer"),
            ({"messages": messages(PROMPT), "user": "bad id!"}, "episode id"),
        ]:
            status, answer = post(url, body)
            assert status == 400 and said in answer["error"]["message"], body


def test_a_prompt_longer_than_the_context_is_refused_with_its_size(chat_tok):
    policy, _, server = serve(chat_tok, [FIRST], strict=False, max_positions=8)
    with server:
        status, answer = post(server.url + "/v1/chat/completions", {"messages": messages(PROMPT)})
    assert status == 400 and "a call's limit is 8" in answer["error"]["message"]
    assert policy.seen == []


class HiddenTokens:
    """An engine whose first answer holds tokens the harness never sees: a pad token mid-text
    (special: dropped from the text) and a stop sequence (cut from the text)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.seen = tokenizer, []

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def generate(self, prompt_ids, params, *, n):
        self.seen.append([list(p) for p in prompt_ids])
        tok = self.tokenizer
        if len(self.seen) == 1:  # "def f" <pad> "(x)" then the stop sequence "print"
            ids = self.ids("def f") + [tok.pad_token_id] + self.ids("(x)") + self.ids("print")
            text, finish = "def f(x)", "stop"
        else:
            ids, text, finish = self.ids("ok") + [tok.eos_token_id], "ok", "eos"
        return [Completion(0, text, torch.tensor(prompt_ids[0]), torch.tensor(ids),
                           torch.full((len(ids),), LOGPROB), finish)]  # fmt: skip


def test_tokens_the_harness_never_saw_stay_as_sampled(chat_tok):
    """The harness sends back the text it was shown (no pad, cut before the stop sequence):
    the call extends the conversation as shown, and the model is given its own ids, pad and
    stop sequence included, never a re-encoding of the shown text."""
    engine = HiddenTokens(chat_tok)
    recorder = Recorder(chat_tok, strict=True)
    settings = ServeSettings(chat=True, sampling=RUN_SAMPLING, fixed_sampling=True)
    key = recorder.open("ep")
    with PolicyServer(engine, chat_tok, settings, recorder) as server:
        url = server.url + "/e/ep/v1/chat/completions"
        _, one = post(url, {"messages": messages(PROMPT), "stop": ["print"]}, bearer(key))
        assert one["choices"][0]["message"]["content"] == "def f(x)"
        _, two = post(url, {"messages": messages(PROMPT, "def f(x)", CHECK)}, bearer(key))
    assert two["execrl"]["extends"] == "shown"
    prompt = chat_tok(f"<user>{PROMPT}{chat_tok.eos_token}\n<assistant>",
                      add_special_tokens=False)["input_ids"]  # fmt: skip
    sampled = (
        engine.ids("def f") + [chat_tok.pad_token_id] + engine.ids("(x)") + engine.ids("print")
    )
    # the template closes the shown answer with eos: that and the next turn are the new text
    added = chat_tok.encode(f"{chat_tok.eos_token}\n<user>{CHECK}{chat_tok.eos_token}\n<assistant>",
                            add_special_tokens=False)  # fmt: skip
    assert engine.seen[1] == [prompt + sampled + added]
    [segment] = recorder.close("ep").trajectories(final_reward=0.0)
    assert [t for t, m in zip(segment.token_ids, segment.loss_mask, strict=True) if m] == (
        sampled + engine.ids("ok") + [chat_tok.eos_token_id]
    )


class EchoPolicy:
    """Answers every prompt of a batch with the same text; records the batch sizes."""

    def __init__(self, tokenizer, text: str) -> None:
        self.tokenizer, self.text, self.batches = tokenizer, text, []
        self.ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]

    def generate(self, prompt_ids, params, *, n):
        self.batches.append(len(prompt_ids))
        return [Completion(i, self.text, torch.tensor(p), torch.tensor(self.ids),
                           torch.full((len(self.ids),), LOGPROB), "eos")
                for i, p in enumerate(prompt_ids)]  # fmt: skip


def test_concurrent_episodes_batch_and_each_records_only_its_own_calls(chat_tok):
    from concurrent.futures import ThreadPoolExecutor

    engine = EchoPolicy(chat_tok, FIRST)
    recorder = Recorder(chat_tok, strict=True)
    settings = ServeSettings(chat=True, sampling=RUN_SAMPLING, fixed_sampling=True,
                             batch_wait_s=0.5)  # fmt: skip
    ids = [f"ep{i}" for i in range(8)]
    keys = [recorder.open(episode_id) for episode_id in ids]

    def episode(i: int) -> None:
        url = f"{server.url}/e/{ids[i]}/v1/chat/completions"
        prompt = f"{PROMPT} #{i}"
        post(url, {"messages": messages(prompt)}, bearer(keys[i]))
        post(url, {"messages": messages(prompt, FIRST, CHECK)}, bearer(keys[i]))

    with PolicyServer(engine, chat_tok, settings, recorder) as server:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(episode, range(8)))
    assert max(engine.batches) > 1 and sum(engine.batches) == 16  # calls shared generate calls
    for i, episode_id in enumerate(ids):
        recording = recorder.close(episode_id)
        [segment] = recording.trajectories(final_reward=1.0)
        rendered = f"<user>{PROMPT} #{i}{chat_tok.eos_token}\n<assistant>"
        prompt = chat_tok(rendered, add_special_tokens=False)["input_ids"]
        added = chat_tok.encode(f"\n<user>{CHECK}{chat_tok.eos_token}\n<assistant>",
                                add_special_tokens=False)  # fmt: skip
        assert segment.token_ids == tuple(prompt + engine.ids + added + engine.ids)
        assert [c.how for c in recording.calls] == ["new", "exact"]
