"""Stop rules: a row that closes the code block its prompt asked for stops, a looping row stops,
in every engine, and what is scored means what the whole row would have meant."""

import dataclasses
import json

import pytest
import torch

from execrl.models.engines import decode as decode_module
from execrl.models.engines import sampling as sampling_module
from execrl.models.engines.sampling import SamplingParams, sample
from execrl.models.engines.stop_rules import RowStops, closes_code_block
from execrl.models.engines.vllm_engine import cut_by_rules
from execrl.models.loading.tiny import new_llama
from execrl.rewards.leaves.extract import blank_reasoning, extract_code, fences

from .conftest import SHAPE

PROMPT = "Answer with one ```python block.\n"
BLOCK = "```python\ndef f(x):\n    return x\n```\n"
ANSWER = BLOCK + "This returns x.\n```python\nprint(f(1))\n```\n" + "and more " * 12
LOOP = "x = 1\n" * 16
PLAIN = "def g():\n    return 2\n# alpha beta gamma delta epsilon zeta eta theta iota kappa mu nu xi pi rho\n"


@pytest.mark.parametrize(
    "text",
    [
        BLOCK,
        "```\nbare\n```\n",
        "```bash\nls\n```\n",  # another language's block is not the answer's
        "```bash\nls\n```\n```py\nx\n```\n",
        "```python\nx\n```",  # the closing line has not ended yet
        "```python\nx\n```python\n",  # not a closing line
        "text ```python\nx\n```\n",  # an opening line starts with the fence
        "<think>```python\nx\n```\n</think>",
        "<think>```python\nx\n```\n",  # unclosed reasoning runs to the end
        "<think>a</think>\n```python\nx\n```\n",
        "  ```python\nx\n  ```  \n",
        "",
    ],
)
def test_a_closed_block_is_what_rewards_extract_calls_a_python_block(text):
    # the rule's copy of the fence grammar agrees with the extractor's on whole lines
    whole = text[: text.rfind("\n") + 1]
    python = [f for f in fences(blank_reasoning(whole)) if f.tag.lower() in ("", "python", "py")]
    assert closes_code_block(text) == bool(python)


def _script(tokenizer, texts):
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def _force(monkeypatch, engine, rows):
    """Make the engine take the scripted token ids of each row, greedy, whatever the model says."""
    if engine == "loop":
        step = {"n": 0}

        def pick(logits, temperature, top_p):
            token = torch.tensor([row[min(step["n"], len(row) - 1)] for row in rows])
            step["n"] += 1
            return token, torch.zeros(len(rows))

        monkeypatch.setattr(decode_module, "_pick", pick)
        return
    original = sampling_module._BehaviourLogprobs.__call__

    def force(self, input_ids, scores):
        original(self, input_ids, scores)
        self.width = getattr(self, "width", input_ids.shape[1])
        n = input_ids.shape[1] - self.width
        forced = torch.full_like(scores, -1e9)
        for r, row in enumerate(rows):
            forced[r, row[min(n, len(row) - 1)]] = 0.0
        return forced

    monkeypatch.setattr(sampling_module._BehaviourLogprobs, "__call__", force)


@pytest.fixture
def tiny(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tokenizer.padding_side = "left"
    return new_llama(tokenizer, SHAPE, seed=0).eval(), tokenizer


@pytest.mark.parametrize("engine", ["loop", "hf"])
def test_a_row_stops_at_its_closed_block_or_its_loop_in_every_engine(tiny, monkeypatch, engine):
    model, tokenizer = tiny
    rows = _script(tokenizer, [ANSWER, LOOP, PLAIN])
    budget = len(rows[2])  # the plain row's own length: its script ends with the budget
    _force(monkeypatch, engine, rows)
    prompts = _script(tokenizer, [PROMPT, PROMPT, "Write g."])
    params = SamplingParams(temperature=0.0, max_new_tokens=budget, engine=engine,
                            code_end=True, repeat_ngram=4)  # fmt: skip
    code, loop, plain = sample(model, tokenizer, prompts, params)

    # the block closed: the row ends with its closing line, and the code scored is the same
    assert (code.finish, code.text) == ("code_end", BLOCK)
    assert extract_code(code.text, "f").code == extract_code(ANSWER, "f").code
    assert not code.truncated and code.n_tokens < len(rows[0])
    # the loop: the 4-gram's fourth copy ends it, and it counts as truncated, as the row
    # running to the budget would have
    assert loop.finish == "repeat" and loop.truncated
    assert LOOP.startswith(loop.text) and loop.text.count("x = 1\n") < 16
    assert loop.token_ids.tolist() == rows[1][: loop.n_tokens]
    # no fence asked for in its prompt, no loop: the whole budget
    assert plain.finish == "length" and plain.token_ids.tolist() == rows[2][:budget]


SQL_BLOCK = "```sql\nSELECT 1;\n```\n"


def test_a_row_stops_at_its_first_block_in_its_tasks_language(tiny, monkeypatch):
    """A sql task's answer in a ```sql block ends the row there (it ran to the token budget:
    SmolLM2 tags every query so); for a Python task the same block is not its answer."""
    from execrl.tasks.languages import fence_tags

    assert closes_code_block(SQL_BLOCK, fence_tags("sql"))
    assert not closes_code_block(SQL_BLOCK)  # Python's tags, the default
    assert not closes_code_block(BLOCK, fence_tags("sql"))  # a Python block is no sql answer
    assert closes_code_block("```\nSELECT 1;\n```\n", fence_tags("sql"))  # untagged: any
    assert closes_code_block("```C++\nint x;\n```\n", fence_tags("c++"))  # aliases, any case
    model, tokenizer = tiny
    answer = SQL_BLOCK + "This query counts.\n" * 6
    rows = _script(tokenizer, [answer])
    _force(monkeypatch, "loop", rows)
    params = SamplingParams(temperature=0.0, max_new_tokens=len(rows[0]), code_end=True)
    prompts = _script(tokenizer, ["Answer in a ``` block.\n"])
    (python,) = sample(model, tokenizer, prompts, params)
    assert python.finish == "length"
    _force(monkeypatch, "loop", rows)
    sql = dataclasses.replace(params, code_language="sql")
    (done,) = sample(model, tokenizer, prompts, sql)
    assert (done.finish, done.text) == ("code_end", SQL_BLOCK)


def test_the_rules_are_off_by_default_outside_one_turn_training_and_eval(tiny, monkeypatch):
    model, tokenizer = tiny
    rows = _script(tokenizer, [ANSWER, LOOP])
    _force(monkeypatch, "loop", rows)
    params = SamplingParams(temperature=0.0, max_new_tokens=20)  # the defaults
    done = sample(model, tokenizer, _script(tokenizer, [PROMPT, PROMPT]), params)
    assert [c.finish for c in done] == ["length", "length"]


def test_vllm_completions_are_cut_where_the_in_process_engines_stop(tiny):
    # vLLM has no per-token hook: its whole completion is cut at the same token afterwards
    _, tokenizer = tiny
    rows = _script(tokenizer, [ANSWER, LOOP])
    prompts = _script(tokenizer, [PROMPT, PROMPT])
    rules = RowStops.of(tokenizer, prompts, code_end=True, repeat_ngram=4)
    cut = []
    for row, ids in enumerate(rows):
        whole = sampling_module.Completion(row, "", torch.tensor(prompts[row]), torch.tensor(ids),
                                           torch.zeros(len(ids)), "length")  # fmt: skip
        cut.append(cut_by_rules(whole, rules, row, tokenizer))
    assert (cut[0].finish, cut[0].text) == ("code_end", BLOCK)
    assert cut[1].finish == "repeat" and len(cut[1].logprobs) == cut[1].n_tokens < len(rows[1])


def test_a_negative_repeat_ngram_is_refused():
    with pytest.raises(ValueError, match="repeat_ngram"):
        SamplingParams(repeat_ngram=-1)


def test_the_stop_rules_are_configured_and_saved_with_the_model(tmp_path):
    from execrl.rl.config.config import ConfigError, load_config
    from execrl.rl.eval_spec import HeldoutSpec, heldout_spec

    config = load_config(None, ["sampling.repeat_ngram=32", "sampling.code_end=false"])
    spec = heldout_spec(config)
    assert (spec.code_end, spec.repeat_ngram) == (False, 32)
    with pytest.raises(ConfigError, match="sampling.repeat_ngram must be at least 0"):
        load_config(None, ["sampling.repeat_ngram=-2"])
    # a spec saved before the rules existed evaluates as it did then: no rule
    path = spec.save(tmp_path)
    old = {
        k: v
        for k, v in json.loads(path.read_text()).items()
        if k not in ("code_end", "repeat_ngram")
    }
    path.write_text(json.dumps(old))
    assert (HeldoutSpec.load(tmp_path).code_end, HeldoutSpec.load(tmp_path).repeat_ngram) == (
        False,
        0,
    )


def test_execrl_eval_refuses_a_negative_repeat_ngram(capsys):
    from execrl.cli import main

    assert main(["eval", "--model", "default", "--repeat-ngram", "-1"]) == 2
    assert "--repeat-ngram -1: give 0 (off) or a token count" in capsys.readouterr().err
