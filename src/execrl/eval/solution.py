"""How a completion becomes a program, as the official harnesses build it:
- plain completion of a code prompt (HumanEval style): the prompt followed by the completion,
  cut at EvalPlus's stop sequences (a new top-level `def`, `class`, `import`, ...);
- otherwise (a chat model, or a prompt in prose such as MBPP's): the code extracted from the
  answer (`rewards.leaves.extract`: the last fenced block defining the entry point, reasoning blocks
  ignored). A block that continues the function body is appended to a code prompt; a whole
  function gets the prompt's imports in front (`from typing import List`), which instruct
  models often leave out. No code at all is the empty program: it fails, never passes.
"""

from __future__ import annotations

import re

from execrl.models.prompting.prompting import is_code_prompt
from execrl.rewards.leaves.extract import defines, extract_code
from execrl.tasks.schema import Task

_IMPORT = re.compile(r"^(?:import \S.*|from \S+ import .*)$", re.M)


def solution_from(task: Task, raw: str, chat: bool) -> str:
    """The whole program a raw completion stands for (see the module docstring)."""
    code_prompt = is_code_prompt(task.prompt)
    if code_prompt and not chat:
        return task.prompt + raw
    found = extract_code(raw, task.entry_point, language=task.language)
    if found is None:
        return ""
    code = found.code
    if code_prompt and task.entry_point and not defines(code, task.entry_point):
        return task.prompt + code
    missing = [line for line in _IMPORT.findall(task.prompt) if line not in code]
    return "\n".join(missing) + ("\n" if missing else "") + code
