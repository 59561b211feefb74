"""What a task's language is called: the names other tools use for it, and the tags of a fenced
block in it as models write them, with the lines that open and close such a block.

The lowest layer holds them because three layers read them: the sandbox (which toolchain runs a
job), the models layer's stop rule (`models.engines.stop_rules`: a row ends at its first block in
its task's language), and the rewards layer's extraction (`rewards.leaves.extract`: the block that
is the answer).
"""

from __future__ import annotations

import re

# Names other tools use for the same languages (SandboxFusion says "nodejs").
ALIASES = {
    "c++": "cpp",
    "nodejs": "javascript",
    "js": "javascript",
    "node": "javascript",
    "sh": "bash",
}
# The fence tags that name each task language (`Task.language`), as models write them; an
# untagged block counts for every language. SmolLM2-135M-Instruct answers every sql task in a
# ```sql block although the prompt asks for none (issue 27): a block in the task's own language
# is its answer.
FENCE_TAGS = {
    "python": frozenset({"python", "py", "python3", "py3"}),
    "sql": frozenset({"sql", "sqlite", "sqlite3"}),
    "c": frozenset({"c", "h"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx", "hpp"}),
    "javascript": frozenset({"javascript", "js", "node", "nodejs"}),
    "bash": frozenset({"bash", "sh", "shell", "zsh"}),
    "verilog": frozenset({"verilog", "v", "systemverilog", "sv"}),
}


# The lines that open and close a fenced block: an opening line "```tag" (blanks around), closed by
# the next line that is only "```". The extractor (`rewards.leaves.extract.fences`) and the stop
# rule (`models.engines.stop_rules`) read blocks by these same two lines.
FENCE_OPENING = re.compile(r"[ \t]*```[ \t]*([\w+#.-]*)")
FENCE_CLOSING = re.compile(r"[ \t]*```[ \t]*")


def canonical_name(language: str) -> str:
    """The language's own name, lower case (c++ is cpp)."""
    return ALIASES.get(language.lower(), language.lower())


def fence_tags(language: str) -> frozenset[str]:
    """The tags (lower case) of a block in `language`, the empty tag included."""
    name = canonical_name(language)
    return FENCE_TAGS.get(name, frozenset({name})) | {""}
