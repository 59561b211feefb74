"""The `diagram` suite: draw the diagram described, in Graphviz DOT (levels 1 and 2) or TikZ
(level 3); the `diagram` verifier renders it and scores its rendered structure and look
against the reference's.

Tasks come from the hand-written templates of `diagram_tasks`, their slots filled with words
drawn from one vocabulary. Each task's wrong solution is either the template's own (one edge,
direction or label off) or one of the hacks the verifier must not reward: one node holding all
the text (the look without the structure), an empty picture, an embedded image, and for TikZ a
`\\write18`, a read of `/etc/passwd` and a read of the reference's render.
"""

from __future__ import annotations

import random
from pathlib import Path

from execrl.tasks.schema import Task, VerifierTests
from execrl.tasks.suites.diagram_tasks import TEMPLATES, VOCABULARY, Template

INSTRUCTIONS = {
    "dot": (
        "\nWrite it in Graphviz DOT (one `digraph` or `graph`; use the given words as the node "
        "labels). Answer with the DOT source in a ``` block without a language tag."
    ),
    "tikz": (
        "\nWrite it in TikZ: one tikzpicture environment and no preamble (TikZ is loaded with "
        "the libraries arrows.meta, automata, calc, positioning and shapes.geometric). Use the "
        "given words as the node texts. Answer with the picture in a ``` block without a "
        "language tag."
    ),
}


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    template = rng.choice([t for t in TEMPLATES if t.level == level])
    words = _draw_words(rng, template)
    reference = fill(template.reference, words)
    hacks = HACKS[template.format](words)
    # Half the tasks check the template's near miss, the other half one of the hacks.
    wrong = fill(template.wrong, words) if rng.random() < 0.5 else rng.choice(hacks)
    spec = {"format": template.format, "reference": reference}
    return Task(
        id="",
        prompt=fill(template.prompt, words) + INSTRUCTIONS[template.format],
        tests=VerifierTests("diagram", spec, wrong),
        reference=reference,
        language=template.format,
        metadata={"template": template.name},
    )


def fill(text: str, words: list[str]) -> str:
    # Highest slot first: "@1" must not eat the start of "@10".
    for i in reversed(range(len(words))):
        text = text.replace(f"@{i}", words[i])
    return text


def _draw_words(rng: random.Random, template: Template) -> list[str]:
    """A distinct word for each slot, from the slot's vocabulary."""
    used: set[str] = set()
    words = []
    for vocabulary in template.words:
        word = rng.choice([w for w in VOCABULARY[vocabulary] if w not in used])
        used.add(word)
        words.append(word)
    return words


def dot_hacks(words: list[str]) -> list[str]:
    text = " ".join(words)
    return [
        f'digraph G {{\n  all [shape=box, label="{text}"];\n}}\n',  # the text, no structure
        "digraph G {\n}\n",  # nothing drawn
        f'digraph G {{\n  picture [image="reference.png", label=""];\n  {words[0]} -> picture;\n}}\n',
    ]


def tikz_hacks(words: list[str]) -> list[str]:
    text = " ".join(words)
    picture = "\\begin{{tikzpicture}}\n{}\n\\end{{tikzpicture}}\n"
    return [
        picture.format(f"  \\node[draw] {{{text}}};"),
        picture.format("  \\path (0,0) -- (1,1);"),
        picture.format("  \\node {\\includegraphics{reference.png}};"),
        picture.format(f"  \\immediate\\write18{{cp ../reference.png .}}\n  \\node {{{text}}};"),
        picture.format(f"  \\node {{\\input{{/etc/passwd}}}};\n  \\node {{{text}}};"),
        picture.format(
            f"  \\node {{\\input{{../reference/candidate.tex}}}};\n  \\node {{{text}}};"
        ),
    ]


HACKS = {"dot": dot_hacks, "tikz": tikz_hacks}
