"""An agent that rewrites its own history: it drafts an answer, then asks again in a fresh
conversation that carries the draft as a comment above the task (the way agents summarise or
hand off their context), and submits the second answer. Its two calls do not extend one
conversation, so every episode has two token-exact segments (docs/harness.md).

    [env]
    name = "harness"
    harness = "python examples/agents/draft_then_rewrite.py"

Standard library only; it reads what execrl gives every harness (OPENAI_BASE_URL, OPENAI_API_KEY,
EXECRL_MODEL, EXECRL_TASK_FILE, EXECRL_ANSWER_FILE). Run by hand against `execrl serve-policy`, set
them yourself (docs/harness.md shows how); without EXECRL_MODEL it asks for "policy", without
EXECRL_ANSWER_FILE it prints the answer (execrl grades a harness's output when it wrote no file).
"""

import json
import os
import sys
import urllib.request

TASK_HINT = (
    "execrl train sets it for each episode; run by hand, write the task as JSON "
    '({"id", "prompt", "entry_point", "language"}) and set EXECRL_TASK_FILE to that file '
    "(docs/harness.md, `execrl serve-policy`)"
)
HINTS = {
    "EXECRL_TASK_FILE": TASK_HINT,
    "OPENAI_API_KEY": "the episode's key, or serve-policy's token (docs/harness.md)",
}


def setting(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        hint = HINTS.get(name, "the policy's /v1 URL (docs/harness.md)")
        print(f"draft_then_rewrite.py: {name} is not set: {hint}", file=sys.stderr)
        sys.exit(2)
    return value


def complete(prompt: str) -> str:
    body = {"model": os.environ.get("EXECRL_MODEL", "policy"), "prompt": prompt, "max_tokens": 256}
    request = urllib.request.Request(
        setting("OPENAI_BASE_URL") + "/completions",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + setting("OPENAI_API_KEY"),  # the episode's key
        },
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["text"]


def main() -> None:
    with open(setting("EXECRL_TASK_FILE")) as f:
        task = json.load(f)
    draft = complete(task["prompt"])
    noted = "".join(f"# {line}\n" for line in (task["prompt"] + draft).splitlines()[-12:])
    final = complete(f"# A draft:\n{noted}\n{task['prompt']}")
    if os.environ.get("EXECRL_ANSWER_FILE"):
        with open(os.environ["EXECRL_ANSWER_FILE"], "w") as f:
            f.write(final)
    else:
        print(final)


if __name__ == "__main__":
    main()
