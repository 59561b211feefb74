"""Signature prompts, named prompts and the embedded default's SFT pairs, on hand-written tasks."""

import pytest

from execrl.models.loading.default import DefaultRecipe, build_default_model, sft_pairs
from execrl.models.loading.loading import load_policy
from execrl.models.loading.sft import SFTSettings
from execrl.models.loading.tiny import TinyLlamaShape, train_bpe_tokenizer
from execrl.models.prompting.prompting import (
    named_prompt,
    names_entry_point,
    reference_answer,
    reference_completion,
    signature_prompt,
    signature_split,
    with_named_entry_points,
    with_signature_prompts,
)
from execrl.rewards.scoring.scorer import build_sample
from execrl.tasks import CallTests, Task

TESTS = CallTests(((2,),), (160,))
TIMES = Task(
    id="t/times_80",
    prompt="Write a function times_80(x) that returns x times 80.",
    tests=TESTS,
    entry_point="times_80",
    reference="def times_80(x):\n    return x * 80\n",
)


def test_signature_prompt_ends_with_the_def_line():
    assert signature_prompt(TIMES) == (
        "# Write a function times_80(x) that returns x times 80.\ndef times_80(x):\n"
    )
    assert signature_split(TIMES) == ("def times_80(x):\n", "    return x * 80\n")


def test_imports_before_the_def_line_stay_in_the_prompt():
    task = Task(id="t/r", prompt="Write r(xs) that\nsorts xs.", tests=TESTS, entry_point="r",
                reference="import math\n\ndef r(xs) -> list:\n    return sorted(xs)\n")  # fmt: skip
    assert (
        signature_prompt(task)
        == "# Write r(xs) that\n# sorts xs.\nimport math\n\ndef r(xs) -> list:\n"
    )


def test_tasks_without_a_usable_reference_or_with_code_prompts_are_unchanged():
    code = Task(id="c", prompt="def f(x):\n    ", tests=TESTS, entry_point="f",
                reference="def f(x):\n    return x\n")  # fmt: skip
    no_ref = Task(id="n", prompt="Write f.", tests=TESTS, entry_point="f")
    other = Task(
        id="o", prompt="Write f.", tests=TESTS, entry_point="f", reference="def g():\n  1\n"
    )
    assert with_signature_prompts([code, no_ref, other]) == [code, no_ref, other]


def test_sft_pair_is_the_body_and_the_program_is_prompt_plus_completion():
    ((prompt, completion),) = sft_pairs([TIMES])
    assert completion == "    return x * 80\n"
    (task,) = with_signature_prompts([TIMES])
    sample = build_sample(task, completion)
    assert sample.program == prompt + completion
    namespace: dict = {}
    exec(sample.program, namespace)  # our own hand-written program
    assert namespace["times_80"](2) == 160


def test_individual_digits_tokenize_a_number_the_same_everywhere():
    tok = train_bpe_tokenizer(["times_54(x) x * 54 54 54"] * 20, 300, individual_digits=True)
    pieces = tok.convert_ids_to_tokens(tok("times_54 x * 54")["input_ids"])
    assert pieces.count("5") == 2 and pieces.count("4") == 2, pieces


def test_build_default_model_saves_a_loadable_raw_prompt_model(tmp_path):
    recipe = DefaultRecipe(
        shape=TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64),
        vocab_size=300, sft=SFTSettings(steps=2, batch_size=2, warmup=1),
    )  # fmt: skip
    directory = build_default_model(tmp_path / "m", [TIMES] * 4, recipe, log=lambda m: None)
    policy = load_policy(str(directory))
    assert not getattr(policy.tokenizer, "chat_template", None)  # continues code: no template
    assert (directory / "execrl_recipe.json").is_file()


# -- named prompts: every format names the function the tests call ---------------------------

MBPP_LIKE = Task(
    id="Mbpp/11",
    prompt="Write a python function to remove first and last occurrence of a given character "
    'from the string.\nYour code should pass these tests:\n\nassert remove_Occ("hello","l") == "heo"\n',
    tests=TESTS,
    entry_point="remove_Occ",
    reference="def remove_Occ(s,ch): \n    return s.replace(ch, '')\n",
)


def test_a_prompt_that_only_calls_the_function_gets_its_name():
    # hand-derived: the asserts call remove_Occ, but nothing says that is the function to write
    assert named_prompt(MBPP_LIKE) == MBPP_LIKE.prompt + "Name the function remove_Occ.\n"
    docstring = Task(id="m+", prompt='"""\nassert f(1) == 2\n"""\n', tests=TESTS, entry_point="f")
    assert named_prompt(docstring) == '"""\nassert f(1) == 2\n"""\n# Name the function f.\n'
    method = Task(id="l", prompt="Solve it.", tests=TESTS, entry_point="Solution.count")
    assert named_prompt(method) == "Solve it.\nName the method count of class Solution."


def test_a_prompt_that_names_its_function_is_unchanged():
    # the synthetic suite and the embedded default's prompts say "function NAME(", HumanEval's
    # and signature prompts "def NAME("
    assert named_prompt(TIMES) == TIMES.prompt
    signed = with_signature_prompts([MBPP_LIKE])[0]
    assert signed.prompt.endswith("def remove_Occ(s,ch): \n")
    assert with_named_entry_points([signed]) == [signed]


@pytest.mark.parametrize("benchmark", ["mbpp", "mbpp-sanitized", "humaneval", "mbpp-train"])
def test_every_prompt_format_names_the_function_the_tests_call(data_dir, benchmark):
    from execrl.eval.generation import prompt_text
    from execrl.rl.eval_spec import PROMPT_FORMATS, prompted
    from execrl.tasks.catalog.registry import load_benchmark

    tasks = [t for t in load_benchmark(benchmark, data_dir) if t.entry_point]
    assert tasks
    # training and held-out evaluation (`execrl train`, `execrl eval` of a trained model)
    for prompt_format in PROMPT_FORMATS:
        unnamed = [t.id for t in prompted(tasks, prompt_format)
                   if not names_entry_point(t.prompt, t.entry_point)]  # fmt: skip
        assert unnamed == [], prompt_format
    # `execrl eval` of any other model, as the harness prompts it, chat and raw
    for chat in (True, False):
        texts = [prompt_text(t, chat) for t in with_named_entry_points(tasks)]
        assert all(names_entry_point(x, t.entry_point) for x, t in zip(texts, tasks, strict=True))


def test_a_chat_models_reference_answer_is_one_clean_fenced_block():
    """Correction and warm-up targets for a chat model: the reference in one fenced block, as its
    answers are read; MBPP's tabs and CRLF re-printed, so a warm-up does not teach them."""
    from execrl.rewards.leaves.extract import extract_code

    mbpp = Task(id="mbpp/1", prompt="Write a function f.", tests=TESTS, entry_point="f",
                reference="def f(x):\r\n\treturn x * 80 \r\n")  # fmt: skip
    answer = reference_answer(mbpp, chat=True)
    assert answer == "```python\ndef f(x):\n    return x * 80\n```"
    assert extract_code(answer, "f").code == "def f(x):\n    return x * 80\n"
    # a model continuing the prompt is given what follows it, as before
    assert reference_answer(TIMES, chat=False) == reference_completion(TIMES)
    # other languages keep their text and their tag; no reference, no answer
    sql = Task(id="q/1", prompt="Count the rows.", tests=TESTS, language="sql",
               reference="SELECT COUNT(*) FROM t;\r\n")  # fmt: skip
    assert reference_answer(sql, chat=True) == "```sql\nSELECT COUNT(*) FROM t;\n```"
    assert reference_answer(Task(id="x", prompt="p", tests=TESTS), chat=True) is None
