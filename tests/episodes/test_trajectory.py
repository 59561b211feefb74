"""Chat-template episodes: environment turns appended as ids through the template, checked
append-only; a template that rewrites past turns is refused with its name."""

from __future__ import annotations

import copy

import pytest

from execrl.rl.episodes import EnvConfig, NotAppendOnly

from .conftest import play
from .test_environments import ADD, RIGHT

APPEND_ONLY = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
# Past assistant turns are rendered without their content (as templates that drop earlier
# reasoning do): re-rendering changes text the model already saw.
DROPS_PAST = (
    "{% for m in messages %}{% if m['role'] == 'assistant' and not loop.last %}<assistant>"
    "{% else %}<{{ m['role'] }}>{{ m['content'] }}{% endif %}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
FENCED_WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
FENCED_RIGHT = "```python\ndef add(a, b):\n" + RIGHT + "```"


def chat_tokenizer(tokenizer, template: str):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = template
    return tok


def test_chat_turns_are_appended_through_the_template(scorer, tokenizer):
    tok = chat_tokenizer(tokenizer, APPEND_ONLY)
    env = EnvConfig("self_correct", max_turns=2)
    policy, episode = play(scorer, tok, env, [FENCED_WRONG, FENCED_RIGHT], ADD, chat=True)
    traj = episode.trajectory
    feedback = episode.observations[0]
    messages = [
        {"role": "user", "content": ADD.prompt},
        {"role": "assistant", "content": FENCED_WRONG},
        {"role": "user", "content": feedback},
        {"role": "assistant", "content": FENCED_RIGHT},
    ]
    # the whole conversation re-rendered is exactly the trajectory's text
    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert tok.decode(list(traj.token_ids), skip_special_tokens=False) + "\n" == rendered
    # the policy's ids are verbatim, masked 1; everything else (turn markers too) is masked 0
    first, second = policy.ids(FENCED_WRONG), policy.ids(FENCED_RIGHT)
    (a, b), (c, d) = traj.turn_spans
    assert list(traj.token_ids[a:b]) == first and list(traj.token_ids[c:d]) == second
    assert sum(traj.loss_mask) == len(first) + len(second)
    assert all(traj.loss_mask[i] == 1 for i in range(a, b))
    assert traj.turn_rewards == (0.0, 1.0)
    env_text = tok.decode(list(traj.token_ids[b:c]), skip_special_tokens=False)
    assert env_text == f"\n<user>{feedback}{tok.eos_token}\n<assistant>"


def test_a_template_that_rewrites_past_turns_is_refused_by_name(scorer, tokenizer):
    tok = chat_tokenizer(tokenizer, DROPS_PAST)
    tok.name_or_path = "my-org/drops-reasoning"
    env = EnvConfig("self_correct", max_turns=2)
    with pytest.raises(NotAppendOnly, match="'my-org/drops-reasoning' is not append-only"):
        play(scorer, tok, env, [FENCED_WRONG, FENCED_RIGHT], ADD, chat=True)


def test_a_tool_turn_goes_through_the_template_as_role_tool(scorer, tokenizer):
    tok = chat_tokenizer(tokenizer, APPEND_ONLY)
    call = "```python exec\nprint(2 + 3)\n```"
    _, episode = play(
        scorer, tok, EnvConfig("tool", max_turns=2), [call, FENCED_RIGHT], ADD, chat=True
    )
    traj = episode.trajectory
    (_, b), (c, _) = traj.turn_spans
    tool_turn = tok.decode(list(traj.token_ids[b:c]), skip_special_tokens=False)
    assert tool_turn == f"\n<tool>Output:\n5\n{tok.eos_token}\n<assistant>"
    assert set(traj.loss_mask[b:c]) == {0} and traj.turn_rewards == (0.0, 1.0)


def test_an_environment_turn_that_does_not_round_trip_is_refused(scorer, tokenizer):
    """Re-tokenisation drift: a tokenizer that rewrites text (here, lowercases it) would train
    on ids that are not the text the environment sent; the episode stops with an error."""
    from tokenizers import normalizers

    from .test_environments import WRONG

    tok = copy.deepcopy(tokenizer)
    tok.backend_tokenizer.normalizer = normalizers.Lowercase()
    with pytest.raises(NotAppendOnly, match="does not encode the environment's turn 1 reversibly"):
        play(scorer, tok, EnvConfig("self_correct", max_turns=2), [WRONG, RIGHT], ADD)


def test_a_template_without_a_tool_role_is_refused_by_name(scorer, tokenizer):
    strict = (
        "{% for m in messages %}{% if m['role'] not in ('user', 'assistant') %}"
        "{{ raise_exception('roles must be user or assistant') }}{% endif %}"
        "<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    tok = chat_tokenizer(tokenizer, strict)
    tok.name_or_path = "org/no-tools"
    call = "```python exec\nprint(1)\n```"
    with pytest.raises(ValueError, match="'org/no-tools' cannot render .* after a 'tool' turn"):
        play(scorer, tok, EnvConfig("tool", max_turns=2), [call, FENCED_RIGHT], ADD, chat=True)
