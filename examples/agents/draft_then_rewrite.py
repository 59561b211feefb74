"""An agent that rewrites its own history: it drafts an answer, then asks again in a fresh
conversation that carries the draft as a comment above the task (the way agents summarise or
hand off their context), and submits the second answer. Its two calls do not extend one
conversation, so every episode has two token-exact segments (docs/harness.md).

    [env]
    name = "harness"
    harness = "python examples/agents/draft_then_rewrite.py"

Standard library only; it reads what execrl gives every harness (OPENAI_BASE_URL, OPENAI_API_KEY,
EXECRL_MODEL, EXECRL_TASK_FILE, EXECRL_ANSWER_FILE).
"""

import json
import os
import urllib.request


def complete(prompt: str) -> str:
    body = {"model": os.environ["EXECRL_MODEL"], "prompt": prompt, "max_tokens": 256}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/completions",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],  # the episode's key
        },
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["text"]


def main() -> None:
    with open(os.environ["EXECRL_TASK_FILE"]) as f:
        task = json.load(f)
    draft = complete(task["prompt"])
    noted = "".join(f"# {line}\n" for line in (task["prompt"] + draft).splitlines()[-12:])
    final = complete(f"# A draft:\n{noted}\n{task['prompt']}")
    with open(os.environ["EXECRL_ANSWER_FILE"], "w") as f:
        f.write(final)


if __name__ == "__main__":
    main()
