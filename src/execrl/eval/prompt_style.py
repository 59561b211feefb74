"""How `execrl eval` asks a model for an answer and reads the program out of it (`--prompt`).

- `execrl` (the default): a chat model is asked for the whole function in one fenced block,
  and the program is the block that defines the entry point (`eval.solution`); a base model
  continues a code prompt up to EvalPlus's stop sequences.
- `evalplus`: EvalPlus's own protocol for instruct models (evalplus 0.3, `codegen.py` and
  `provider/utility.py`), the one the Qwen2.5-Coder report's HumanEval(+) and MBPP(+) figures
  come from: the task's prompt in a fence after EvalPlus's instruction, the model's reply
  begun with EvalPlus's response prefix and an open ```python fence, generation stopped at the
  closing fence or EvalPlus's end strings, and the answer sanitised (`eval.sanitize`) before
  it is graded. A model without a chat template completes the prompt directly, as EvalPlus
  does for base models. The raw answer is kept beside the program in samples.jsonl, so the
  same answers can be graded without the sanitiser (`execrl eval-samples` on `raw`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from execrl.eval.sanitize import sanitize
from execrl.eval.solution import solution_from
from execrl.models.prompting.prompting import is_code_prompt
from execrl.tasks.schema import Task

# EvalPlus's default instruct prompt (codegen.py, `evalperf_type` unset); its figures need its
# exact words
EVALPLUS_INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a "
    "markdown code block:"
)
EVALPLUS_RESPONSE = (
    "Below is a Python script with a self-contained function that solves the problem and "
    "passes corresponding tests:"
)
# EvalPlus's end strings for every model (provider/utility.py's EOS, less the special tokens an
# engine ends at anyway), the closing fence for chat models, and for direct completion of a
# code prompt the new top-level statements of `extra_eos_for_direct_completion`
_EVALPLUS_ENDS = ("\nif __name__", "\ndef main(", "\nprint(")
_EVALPLUS_CHAT_ENDS = (*_EVALPLUS_ENDS, "\n```\n")
_EVALPLUS_CODE_ENDS = (*_EVALPLUS_ENDS, "\ndef ", "\nclass ", "\nimport ", "\nfrom ", "\nassert ")
_EVALPLUS_PROSE_ENDS = (*_EVALPLUS_ENDS, '\n"""', "\nassert")

# EvalPlus's extra stop sequences for direct completion of a code prompt (codegen.py).
CODE_PROMPT_STOPS = (
    "\ndef ",
    "\nclass ",
    "\nimport ",
    "\nfrom ",
    "\nassert ",
    '\n"""',
    "\nif __name__",
    "\nprint(",
)
PROSE_PROMPT_STOPS = ("\nif __name__", "\nassert ")

CHAT_INSTRUCTION = (
    "Complete the following Python function. Answer with the whole function, with any imports "
    "it needs, in one ```python code block.\n\n```python\n{prompt}\n```"
)


@dataclass(frozen=True, slots=True)
class PromptStyle:
    """One way of asking; every function takes `chat`, whether the chat template is used."""

    name: str
    text: Callable[[Task, bool], str]  # the user's message (or the raw prompt)
    reply_prefix: Callable[[bool], str]  # what the model's reply begins with ("": nothing)
    stops: Callable[[Task, bool], tuple[str, ...]]  # where generation ends, besides eos
    program: Callable[[Task, str, bool], str]  # the program a raw answer stands for


def _execrl_text(task: Task, chat: bool) -> str:
    if chat and is_code_prompt(task.prompt):
        return CHAT_INSTRUCTION.format(prompt=task.prompt.strip())
    return task.prompt


def stops_for(task: Task) -> tuple[str, ...]:
    return CODE_PROMPT_STOPS if is_code_prompt(task.prompt) else PROSE_PROMPT_STOPS


def _evalplus_text(task: Task, chat: bool) -> str:
    if not chat:
        return task.prompt.strip() + "\n"
    return f"{EVALPLUS_INSTRUCTION}\n```\n{task.prompt.strip()}\n```\n"


def _evalplus_direct_ends(task: Task) -> tuple[str, ...]:
    return _EVALPLUS_CODE_ENDS if is_code_prompt(task.prompt) else _EVALPLUS_PROSE_ENDS


def _evalplus_program(task: Task, raw: str, chat: bool) -> str:
    answer = raw if chat else task.prompt.strip() + "\n" + raw
    return sanitize(answer, task.entry_point)


STYLES = {
    "execrl": PromptStyle(
        "execrl",
        _execrl_text,
        lambda chat: "",
        lambda task, chat: () if chat else stops_for(task),
        solution_from,
    ),
    "evalplus": PromptStyle(
        "evalplus",
        _evalplus_text,
        lambda chat: f"{EVALPLUS_RESPONSE}\n```python\n" if chat else "",
        lambda task, chat: _EVALPLUS_CHAT_ENDS if chat else _evalplus_direct_ends(task),
        _evalplus_program,
    ),
}
