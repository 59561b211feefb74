"""The `diagram` suite's tasks, written by hand: each a description, a reference diagram and a
wrong one (an edge, a direction or a label off), with `@0`, `@1`, ... standing for words the
suite draws from one vocabulary (so one template gives many tasks with distinct prompts).

Level 1: small DOT graphs and trees. Level 2: DOT flowcharts and state machines with labelled
edges. Level 3: TikZ pictures (flowcharts, state machines, trees, labelled graphs).
"""

from __future__ import annotations

from dataclasses import dataclass

VOCABULARY = {
    "steps": ("start", "load", "parse", "check", "save", "send", "merge", "review", "build",
              "deploy", "test", "clean"),
    "states": ("idle", "running", "paused", "stopped", "waiting", "ready", "failed", "active",
               "locked", "open", "closed", "armed"),
    "people": ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan",
               "judy", "mallory", "oscar"),
    "cities": ("paris", "rome", "berlin", "madrid", "oslo", "vienna", "prague", "lisbon",
               "dublin", "athens", "warsaw", "zurich"),
    "events": ("go", "halt", "pause", "resume", "reset", "fail", "retry", "ok", "timeout",
               "cancel", "tick", "done"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    level: int
    format: str  # "dot" or "tikz"
    words: tuple[str, ...]  # the vocabulary of each slot @0, @1, ... (distinct words per list)
    prompt: str
    reference: str
    wrong: str  # the reference with one structural mistake


def _dot(name: str, level: int, words: tuple[str, ...], prompt: str, ref: str, wrong: str):
    return Template(name, level, "dot", words, prompt, ref.strip() + "\n", wrong.strip() + "\n")


def _tikz(name: str, words: tuple[str, ...], prompt: str, ref: str, wrong: str):
    return Template(name, 3, "tikz", words, prompt, ref.strip() + "\n", wrong.strip() + "\n")


S3, S4, S5 = ("steps",) * 3, ("steps",) * 4, ("steps",) * 5
C3, C4, C5 = ("cities",) * 3, ("cities",) * 4, ("cities",) * 5
P4, P5 = ("people",) * 4, ("people",) * 5

TEMPLATES: tuple[Template, ...] = (
    _dot("chain", 1, S4,
         "A directed graph drawn left to right: @0 points to @1, @1 to @2, and @2 to @3.",
         "digraph G {\n  rankdir=LR;\n  @0 -> @1;\n  @1 -> @2;\n  @2 -> @3;\n}",
         "digraph G {\n  rankdir=LR;\n  @0 -> @1;\n  @2 -> @1;\n  @2 -> @3;\n}"),
    _dot("org-tree", 1, P5,
         "An organisation chart as a directed tree: @0 manages @1 and @2; @1 manages @3 and @4.",
         "digraph G {\n  @0 -> @1;\n  @0 -> @2;\n  @1 -> @3;\n  @1 -> @4;\n}",
         "digraph G {\n  @0 -> @1;\n  @0 -> @2;\n  @1 -> @3;\n  @2 -> @4;\n}"),
    _dot("triangle", 1, C3,
         "An undirected graph of roads: @0, @1 and @2, each city joined to the other two.",
         "graph G {\n  @0 -- @1;\n  @1 -- @2;\n  @2 -- @0;\n}",
         "graph G {\n  @0 -- @1;\n  @1 -- @2;\n}"),
    _dot("star", 1, C5,
         "An undirected star: the hub @0 is joined to @1, @2, @3 and @4, which are not joined "
         "to each other.",
         "graph G {\n  @0 -- @1;\n  @0 -- @2;\n  @0 -- @3;\n  @0 -- @4;\n}",
         "graph G {\n  @0 -- @1;\n  @0 -- @2;\n  @0 -- @3;\n  @3 -- @4;\n}"),
    _dot("dependencies", 1, S4,
         "A dependency graph: @0 and @1 must both happen before @2, and @2 before @3 (an arrow "
         "from each step to the step that follows it).",
         "digraph G {\n  @0 -> @2;\n  @1 -> @2;\n  @2 -> @3;\n}",
         "digraph G {\n  @0 -> @2;\n  @1 -> @3;\n  @2 -> @3;\n}"),
    _dot("cycle", 1, S4,
         "A directed cycle of four steps: @0 to @1 to @2 to @3 and back to @0.",
         "digraph G {\n  @0 -> @1;\n  @1 -> @2;\n  @2 -> @3;\n  @3 -> @0;\n}",
         "digraph G {\n  @0 -> @1;\n  @1 -> @2;\n  @2 -> @3;\n  @0 -> @3;\n}"),
    _dot("boxes", 1, S3,
         "A directed graph of three boxes (shape=box): @0 points to @1 and to @2, and @1 "
         "points to @2.",
         "digraph G {\n  node [shape=box];\n  @0 -> @1;\n  @0 -> @2;\n  @1 -> @2;\n}",
         "digraph G {\n  node [shape=box];\n  @0 -> @1;\n  @0 -> @2;\n  @2 -> @1;\n}"),
    _dot("toggle", 2, ("states", "states", "events", "events"),
         "A state machine: from @0 the event @2 leads to @1, and from @1 the event @3 leads "
         "back to @0. Label each transition with its event.",
         "digraph G {\n  rankdir=LR;\n  @0 -> @1 [label=\"@2\"];\n  @1 -> @0 [label=\"@3\"];\n}",
         "digraph G {\n  rankdir=LR;\n  @0 -> @1 [label=\"@3\"];\n  @1 -> @0 [label=\"@2\"];\n}"),
    _dot("machine", 2, ("states", "states", "states", "events", "events", "events"),
         "A state machine drawn left to right: @0 goes to @1 on @3, @1 goes to @2 on @4, and "
         "@1 stays in @1 on @5 (a self-loop). @2 is final: draw it as a double circle. Label "
         "each transition with its event.",
         "digraph G {\n  rankdir=LR;\n  @2 [shape=doublecircle];\n"
         "  @0 -> @1 [label=\"@3\"];\n  @1 -> @2 [label=\"@4\"];\n  @1 -> @1 [label=\"@5\"];\n}",
         "digraph G {\n  rankdir=LR;\n  @2 [shape=doublecircle];\n"
         "  @0 -> @1 [label=\"@3\"];\n  @1 -> @2 [label=\"@4\"];\n  @2 -> @2 [label=\"@5\"];\n}"),
    _dot("decision", 2, S4,
         "A flowchart: @0 leads to @1, then to a diamond labelled 'ok?'; its edge labelled "
         "'yes' leads to @2 and its edge labelled 'no' to @3.",
         "digraph G {\n  q [shape=diamond, label=\"ok?\"];\n  @0 -> @1;\n  @1 -> q;\n"
         "  q -> @2 [label=\"yes\"];\n  q -> @3 [label=\"no\"];\n}",
         "digraph G {\n  q [shape=diamond, label=\"ok?\"];\n  @0 -> @1;\n  @1 -> q;\n"
         "  q -> @2 [label=\"no\"];\n  q -> @3 [label=\"yes\"];\n}"),
    _dot("distances", 2, C4,
         "An undirected graph of distances: @0 to @1 is 120, @1 to @2 is 80, @2 to @3 is 45 "
         "and @3 to @0 is 200; label each edge with its distance.",
         "graph G {\n  @0 -- @1 [label=\"120\"];\n  @1 -- @2 [label=\"80\"];\n"
         "  @2 -- @3 [label=\"45\"];\n  @3 -- @0 [label=\"200\"];\n}",
         "graph G {\n  @0 -- @1 [label=\"120\"];\n  @1 -- @2 [label=\"80\"];\n"
         "  @2 -- @3 [label=\"54\"];\n  @3 -- @0 [label=\"200\"];\n}"),
    _dot("retry-loop", 2, ("steps", "steps", "steps", "events"),
         "A flowchart of boxes: @0 leads to @1, @1 leads to @2 on an edge labelled 'ok', and "
         "@1 leads back to @0 on an edge labelled '@3'.",
         "digraph G {\n  node [shape=box];\n  @0 -> @1;\n  @1 -> @2 [label=\"ok\"];\n"
         "  @1 -> @0 [label=\"@3\"];\n}",
         "digraph G {\n  node [shape=box];\n  @0 -> @1;\n  @1 -> @2 [label=\"ok\"];\n"
         "  @0 -> @1 [label=\"@3\"];\n}"),
    _dot("decision-tree", 2, ("steps", "steps", "steps", "steps"),
         "A decision tree: the root question 'ready?' has an edge 'yes' to @0 and an edge 'no' "
         "to the question 'late?'; 'late?' has an edge 'yes' to @1 and an edge 'no' to @2.",
         "digraph G {\n  a [label=\"ready?\"];\n  b [label=\"late?\"];\n"
         "  a -> @0 [label=\"yes\"];\n  a -> b [label=\"no\"];\n  b -> @1 [label=\"yes\"];\n"
         "  b -> @2 [label=\"no\"];\n}",
         "digraph G {\n  a [label=\"ready?\"];\n  b [label=\"late?\"];\n"
         "  a -> @0 [label=\"yes\"];\n  a -> b [label=\"no\"];\n  b -> @2 [label=\"yes\"];\n"
         "  b -> @1 [label=\"no\"];\n}"),
    _dot("handover", 2, ("people", "people", "people", "steps", "steps"),
         "A directed graph of who hands work to whom: @0 hands '@3' to @1, @1 hands '@4' to "
         "@2, and @2 hands '@3' back to @0. Label each edge with the work handed over.",
         "digraph G {\n  @0 -> @1 [label=\"@3\"];\n  @1 -> @2 [label=\"@4\"];\n"
         "  @2 -> @0 [label=\"@3\"];\n}",
         "digraph G {\n  @0 -> @1 [label=\"@3\"];\n  @1 -> @2 [label=\"@4\"];\n"
         "  @0 -> @2 [label=\"@3\"];\n}"),
    _tikz("flow", S3,
          "A vertical flowchart of three boxes, @0 at the top, @1 below it and @2 at the "
          "bottom, with an arrow from each box to the one below.",
          "\\begin{tikzpicture}[every node/.style={draw}, node distance=1.2cm]\n"
          "  \\node (a) {@0};\n  \\node (b) [below=of a] {@1};\n  \\node (c) [below=of b] {@2};\n"
          "  \\draw[->] (a) -- (b);\n  \\draw[->] (b) -- (c);\n\\end{tikzpicture}",
          "\\begin{tikzpicture}[every node/.style={draw}, node distance=1.2cm]\n"
          "  \\node (a) {@0};\n  \\node (b) [below=of a] {@1};\n  \\node (c) [below=of b] {@2};\n"
          "  \\draw[->] (a) -- (b);\n\\end{tikzpicture}"),
    _tikz("automaton", ("states", "states", "events", "events"),
          "A state machine with two states, @0 (initial) on the left and @1 on the right: an "
          "arrow from @0 to @1 labelled @2, and one from @1 back to @0 labelled @3.",
          "\\begin{tikzpicture}[node distance=3cm]\n"
          "  \\node[state, initial] (a) {@0};\n  \\node[state] (b) [right=of a] {@1};\n"
          "  \\draw[->] (a) to[bend left] node[above] {@2} (b);\n"
          "  \\draw[->] (b) to[bend left] node[below] {@3} (a);\n\\end{tikzpicture}",
          "\\begin{tikzpicture}[node distance=3cm]\n"
          "  \\node[state, initial] (a) {@0};\n  \\node[state] (b) [right=of a] {@1};\n"
          "  \\draw[->] (a) to[bend left] node[above] {@2} (b);\n"
          "  \\node at (1.5,-1.2) {@3};\n\\end{tikzpicture}"),
    _tikz("tree", P5,
          "A tree drawn top down: @0 at the root with children @1 and @2; @1 has the children "
          "@3 and @4.",
          "\\begin{tikzpicture}[level distance=1.3cm, level 1/.style={sibling distance=3cm},\n"
          "  level 2/.style={sibling distance=1.6cm}]\n"
          "  \\node {@0}\n    child {node {@1} child {node {@3}} child {node {@4}}}\n"
          "    child {node {@2}};\n\\end{tikzpicture}",
          "\\begin{tikzpicture}[level distance=1.3cm, level 1/.style={sibling distance=3cm},\n"
          "  level 2/.style={sibling distance=1.6cm}]\n"
          "  \\node {@0}\n    child {node {@1} child {node {@3}}}\n"
          "    child {node {@2} child {node {@4}}};\n\\end{tikzpicture}"),
    _tikz("roads", C3,
          "A triangle of cities: @0 at the bottom left, @1 at the bottom right and @2 on top, "
          "with a line between every two of them.",
          "\\begin{tikzpicture}\n  \\node (a) at (0,0) {@0};\n  \\node (b) at (4,0) {@1};\n"
          "  \\node (c) at (2,3) {@2};\n  \\draw (a) -- (b) -- (c) -- (a);\n\\end{tikzpicture}",
          "\\begin{tikzpicture}\n  \\node (a) at (0,0) {@0};\n  \\node (b) at (4,0) {@1};\n"
          "  \\node (c) at (2,3) {@2};\n  \\draw (a) -- (b) -- (c);\n\\end{tikzpicture}"),
    _tikz("pipeline", S4,
          "A pipeline of four boxes from left to right, @0, @1, @2, @3, with an arrow from "
          "each box to the next.",
          "\\begin{tikzpicture}[every node/.style={draw}, node distance=1cm]\n"
          "  \\node (a) {@0};\n  \\node (b) [right=of a] {@1};\n  \\node (c) [right=of b] {@2};\n"
          "  \\node (d) [right=of c] {@3};\n"
          "  \\draw[->] (a) -- (b);\n  \\draw[->] (b) -- (c);\n  \\draw[->] (c) -- (d);\n"
          "\\end{tikzpicture}",
          "\\begin{tikzpicture}[every node/.style={draw}, node distance=1cm]\n"
          "  \\node (a) {@0};\n  \\node (b) [right=of a] {@1};\n  \\node (c) [right=of b] {@2};\n"
          "  \\node (d) [right=of c] {@3};\n"
          "  \\draw[->] (a) -- (b);\n  \\draw[->] (c) -- (d);\n\\end{tikzpicture}"),
    _tikz("square", ("states",) * 4,
          "Four states in a square, @0 top left, @1 top right, @2 bottom right and @3 bottom "
          "left, each a circle, with arrows @0 to @1 to @2 to @3 and back to @0.",
          "\\begin{tikzpicture}[every node/.style={draw, circle}]\n"
          "  \\node (a) at (0,3) {@0};\n  \\node (b) at (4,3) {@1};\n"
          "  \\node (c) at (4,0) {@2};\n  \\node (d) at (0,0) {@3};\n"
          "  \\draw[->] (a) -- (b);\n  \\draw[->] (b) -- (c);\n  \\draw[->] (c) -- (d);\n"
          "  \\draw[->] (d) -- (a);\n\\end{tikzpicture}",
          "\\begin{tikzpicture}[every node/.style={draw, circle}]\n"
          "  \\node (a) at (0,3) {@0};\n  \\node (b) at (4,3) {@1};\n"
          "  \\node (c) at (4,0) {@2};\n  \\node (d) at (0,0) {@3};\n"
          "  \\draw[->] (a) -- (b);\n  \\draw[->] (b) -- (c);\n  \\draw[->] (c) -- (d);\n"
          "  \\draw[->] (a) -- (c);\n\\end{tikzpicture}"),
    _tikz("choice", S3,
          "A flowchart: a box @0 above a diamond labelled 'ok?', with an arrow from the box to "
          "the diamond; from the diamond an arrow to the box @1 on the left and one to the box "
          "@2 on the right.",
          "\\begin{tikzpicture}[node distance=1.2cm]\n  \\node[draw] (a) {@0};\n"
          "  \\node[draw, diamond, aspect=2] (q) [below=of a] {ok?};\n"
          "  \\node[draw] (b) [below left=of q] {@1};\n"
          "  \\node[draw] (c) [below right=of q] {@2};\n"
          "  \\draw[->] (a) -- (q);\n  \\draw[->] (q) -- (b);\n  \\draw[->] (q) -- (c);\n"
          "\\end{tikzpicture}",
          "\\begin{tikzpicture}[node distance=1.2cm]\n  \\node[draw] (a) {@0};\n"
          "  \\node[draw, diamond, aspect=2] (q) [below=of a] {ok?};\n"
          "  \\node[draw] (b) [below left=of q] {@1};\n"
          "  \\node[draw] (c) [below right=of q] {@2};\n"
          "  \\draw[->] (a) -- (q);\n  \\draw[->] (q) -- (b);\n  \\draw[->] (a) -- (c);\n"
          "\\end{tikzpicture}"),
)  # fmt: skip
