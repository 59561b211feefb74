"""Signature prompts: a task's request as a comment followed by its function's `def` line.

A small code model that must retype the function name often gets it wrong (asked for `times_80`
it writes `def times_70`), and the program then fails with a NameError however right the body
is. Ending the prompt with the signature makes the model continue the body, HumanEval style:

    # Write a function times_80(x) that returns x times 80.
    def times_80(x):
        return x * 80          <- the completion

The program that runs is the prompt followed by the completion (the prompt is code), which
`rewards.scoring.scorer.build_sample` already does for code prompts. The `def` line comes from the
task's reference solution and repeats only what the request already says (name and arguments), so it
leaks nothing of the answer.

Named prompts: whatever the format, a prompt names the function the tests call, so a renamed
function is the model's fault, not the prompt's. MBPP's request says only what to compute, and
the name appears in its asserts alone (`assert remove_Occ("hello","l") == "heo"`); a small model
then writes `def remove_occurrence` (SmolLM2-135M did, often: issue 27). A prompt that does not
say `def NAME(`, `class NAME` or `function NAME` gets one sentence more, `Name the function
NAME.` (a comment line at the end of a code prompt), which leaks nothing the tests did not show.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from execrl.tasks.schema import Task


def signature_split(task: Task) -> tuple[str, str] | None:
    """(the reference up to and including the entry point's `def` line, the rest: the body),
    or None when the task has no reference defining its entry point at the top level."""
    if not task.reference or not task.entry_point:
        return None
    pattern = rf"^(async\s+)?def\s+{re.escape(task.entry_point)}\s*\(.*?\)[^:\n]*:[ \t]*\n"
    match = re.search(pattern, task.reference, re.M | re.S)
    if match is None:
        return None
    return task.reference[: match.end()], task.reference[match.end() :]


def reference_completion(task: Task) -> str | None:
    """What a model continuing `task.prompt` writes to give the reference solution: the body
    when the prompt ends with the reference's `def` line (signature prompts), the rest of the
    reference when it starts with the prompt, else the whole reference; None without one."""
    if not task.reference:
        return None
    split = signature_split(task)
    if split is not None and task.prompt.endswith(split[0]):
        return split[1]
    ref = task.reference
    return ref[len(task.prompt) :] if ref.startswith(task.prompt) else ref


def reference_answer(task: Task, *, chat: bool) -> str | None:
    """The reference as the model's answer would carry it: `reference_completion` for a model
    that continues the prompt, and for a chat model one fenced block tagged with the task's
    language with nothing after it, the form its answers are read in (`rewards.leaves.extract`). A
    Python reference is re-printed by `ast.unparse` when it parses: MBPP's mix tabs, CRLF and
    trailing blanks, which a warm-up would otherwise teach. None without a reference."""
    if not chat:
        return reference_completion(task)
    if not task.reference:
        return None
    code = task.reference.replace("\r\n", "\n").strip("\n")
    if task.language == "python":
        try:
            code = ast.unparse(ast.parse(code))
        except (SyntaxError, ValueError):
            pass  # the sandbox judges it as written; keep it so
    return f"```{task.language}\n{code}\n```"


def is_code_prompt(prompt: str) -> bool:
    """Whether a prompt is already code the model continues (HumanEval style)."""
    head = prompt.lstrip()
    return head.startswith(("def ", "from ", "import ", "class ", "@", "#")) or '"""' in prompt


def signature_prompt(task: Task) -> str | None:
    """The request as comment lines, then the reference's code through the `def` line."""
    split = signature_split(task)
    if split is None or is_code_prompt(task.prompt):
        return None
    comment = "\n".join(f"# {line}".rstrip() for line in task.prompt.strip().splitlines())
    return f"{comment}\n{split[0]}"


def with_signature_prompts(tasks: list[Task]) -> list[Task]:
    """The tasks with signature prompts where one can be built; other tasks unchanged."""
    out = []
    for task in tasks:
        prompt = signature_prompt(task)
        out.append(task if prompt is None else dataclasses.replace(task, prompt=prompt))
    return out


def names_entry_point(prompt: str, entry_point: str) -> bool:
    """Whether the prompt says which function (or class) to write, not only calls it."""
    name = re.escape(entry_point.rsplit(".", 1)[-1])
    return re.search(rf"\b(def|class|function|method)\s+`?{name}\b", prompt) is not None


def named_prompt(task: Task) -> str:
    """The task's prompt, with `Name the function NAME.` where it does not name its entry
    point (`Name the method M of class C.` for a `C.M` entry point)."""
    entry = task.entry_point
    if not entry or names_entry_point(task.prompt, entry):
        return task.prompt
    owner, _, name = entry.rpartition(".")
    kind = (
        "class"
        if re.search(rf"^class\s+{re.escape(name)}\b", task.reference or "", re.M)
        else "function"
    )
    sentence = f"Name the method {name} of class {owner}." if owner else f"Name the {kind} {name}."
    if is_code_prompt(task.prompt):
        return f"{task.prompt.rstrip()}\n# {sentence}\n"
    return f"{task.prompt.rstrip()}\n{sentence}" + ("\n" if task.prompt.endswith("\n") else "")


def with_named_entry_points(tasks: list[Task]) -> list[Task]:
    """The tasks with prompts that name their entry point (`named_prompt`)."""
    out = []
    for task in tasks:
        prompt = named_prompt(task)
        out.append(task if prompt == task.prompt else dataclasses.replace(task, prompt=prompt))
    return out
