"""Draw the house: execrl's floors, their rooms and the imports between rooms, at a git revision.

A floor is one of the layers `tests/test_layering.py` orders (tasks → models → sandbox → rewards
→ rl → eval → report) or `cli` on top; a room is a floor's first-level wing (sub-package) or the
modules directly in the floor's package (its root). A floor with wings has its `__init__` drawn
as a room of its own, the face, above the wings it names (as the layering test holds it); the
root module counts include it. Each room→room arrow carries the number of distinct module→module
imports behind it: every `import` and `from … import` of `execrl.*` in the syntax tree (relative
ones and those inside functions too); names loaded by string (`importlib`) are not imports here.
An arrow is red where it goes up (to a higher floor, or against the wing order of
`tests/test_layering.py`, today's, for every revision) or lies on a circle of rooms.

Files are read from git (`git ls-tree`, `git show`), so no checkout is needed. Run from the
repository root; each NAME=REV writes docs/house_NAME.png (and .svg while under 300 KB) and the
table it prints has a column per revision:

    .venv/bin/python benchmarks/draw_house.py before=9afb411 after=HEAD
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# The floors' and wings' order is the layering test's: one order, checked there; the circles
# are found as issue 30's structure report finds circles of modules.
_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO / "tests"), str(_REPO / "scripts")]
from structure_report import cycles  # noqa: E402

from test_layering import LAYERS, ROOT, WINGS  # noqa: E402

FLOORS = [*LAYERS, "cli"]
FACE = "(face)"
PACKAGE = "src/execrl"
SVG_LIMIT = 300_000
Room = tuple[str, str]  # (floor, wing or ROOT or FACE)


@dataclass
class House:
    """Rooms with their module counts, and room→room arrows with their import counts."""

    rooms: Counter[Room] = field(default_factory=Counter)
    arrows: Counter[tuple[Room, Room]] = field(default_factory=Counter)

    def upward(self) -> list[tuple[Room, Room]]:
        return sorted(a for a in self.arrows if goes_up(*a))

    def cycles(self) -> list[list[Room]]:
        return circles(set(self.arrows))

    def root_modules(self, floor: str) -> int:
        return self.rooms[(floor, ROOT)] + self.rooms[(floor, FACE)]


def module_names(sources: dict[str, str]) -> dict[str, str]:
    """Each path under the package (`rl/run.py`) by its dotted name (`execrl.rl.run`)."""
    names = {}
    for path in sources:
        parts = path.removesuffix(".py").split("/")
        names[".".join(["execrl", *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return names


def room_of(path: str, packages: set[str]) -> Room | None:
    """The room of a module's path; None for modules on no floor (the package's `__init__`)."""
    parts = path.removesuffix(".py").split("/")
    floor = parts[0]
    if floor not in FLOORS or len(parts) < 2:
        return None
    has_wings = any(p.startswith(floor + "/") for p in packages)
    if parts[1:] == ["__init__"]:
        return (floor, FACE if has_wings else ROOT)
    wing = parts[1]
    return (floor, wing if len(parts) > 2 and f"{floor}/{wing}" in packages else ROOT)


def imported(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The execrl modules a module's syntax tree imports, each resolved to the longest known
    module its name starts with (`from execrl.sandbox import pool, Verdict` names the module
    `pool` and the package `execrl.sandbox`, whose face holds `Verdict`)."""
    package = name if is_package else name.rpartition(".")[0]
    wanted: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            wanted.extend(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                          for a in node.names)  # fmt: skip
    return {m for w in wanted if (m := _known_prefix(w, known))}


def _known_prefix(name: str, known: set[str]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def build_house(sources: dict[str, str]) -> House:
    """The house of a package given as {path under src/execrl: source}."""
    names = module_names(sources)
    packages = {p.rpartition("/")[0] for p in sources if p.endswith("/__init__.py")}
    house = House()
    for name, path in sorted(names.items()):
        source = room_of(path, packages)
        if source is None:
            continue
        house.rooms[source] += 1
        tree = ast.parse(sources[path], path)
        for target in imported(tree, name, path.endswith("__init__.py"), set(names)):
            room = room_of(names[target], packages)
            if room is not None and room != source and target != name:
                house.arrows[(source, room)] += 1
    return house


def goes_up(source: Room, target: Room) -> bool:
    """Against the floors' order, or against a floor's wing order (the face above its wings)."""
    (floor, wing), (to_floor, to_wing) = source, target
    if floor != to_floor:
        return FLOORS.index(to_floor) > FLOORS.index(floor)
    order = WINGS.get(floor)
    if order is None or wing == FACE:
        return False  # the wings of a floor the layering test does not order have no up
    if to_wing == FACE:
        return True
    return wing in order and to_wing in order and order.index(to_wing) > order.index(wing)


def circles(arrows: set[tuple[Room, Room]]) -> list[list[Room]]:
    """The strongly connected sets of two rooms or more, each sorted."""
    after: dict[Room, set[Room]] = {}
    for a, b in arrows:
        after.setdefault(a, set()).add(b)
    return sorted(cycles(after))


def label(room: Room) -> str:
    floor, wing = room
    return floor if wing == ROOT else f"{floor} {wing}" if wing == FACE else f"{floor}/{wing}"


def dot_source(house: House, title: str, every_arrow: bool = False) -> str:
    """Graphviz text: a cluster per floor, cli on top, floors stacked by invisible anchors. Gray
    arrows between floors are summed per pair of floors unless `every_arrow` (one per pair of
    rooms is too many lines to follow); red ones stay per pair of rooms."""
    red = set(house.upward()) | {
        (a, b) for group in house.cycles() for a, b in house.arrows if a in group and b in group
    }
    node = {room: f"n{i}" for i, room in enumerate(sorted(house.rooms))}
    lines = ["digraph house {", "rankdir=TB; newrank=true; compound=true; nodesep=0.25;",
             'node [shape=box, style="rounded,filled", fillcolor=white, fontsize=11];',
             f'labelloc=b; fontsize=13; label="{caption(house, title, every_arrow)}";']  # fmt: skip
    floors = [f for f in reversed(FLOORS) if any(r[0] == f for r in house.rooms)]
    for i, floor in enumerate(floors):
        lines += _floor(house, floor, i, node)
    across: Counter[tuple[str, str]] = Counter()
    for (a, b), count in sorted(house.arrows.items()):
        if a[0] != b[0] and (a, b) not in red and not every_arrow:
            across[(a[0], b[0])] += count
            continue
        style = f"color=red, fontcolor=red, constraint={'false' if goes_up(a, b) else 'true'}"
        lines.append(_arrow(node[a], node[b], count, style if (a, b) in red else "color=gray40"))
    first = {floor: node[min(r for r in house.rooms if r[0] == floor)] for floor in floors}
    for (a, b), count in sorted(across.items()):
        ends = f"ltail=cluster_{a}, lhead=cluster_{b}, color=gray55, fontcolor=gray30"
        lines.append(_arrow(first[a], first[b], count, ends))
    lines.append("}")
    return "\n".join(lines)


def _floor(house: House, floor: str, i: int, node: dict[Room, str]) -> list[str]:
    """A floor's cluster and the invisible point under it that the next floor hangs below."""
    rooms = sorted(r for r in house.rooms if r[0] == floor)
    lines = [f'subgraph cluster_{floor} {{ label="{floor}"; style=filled; '
             f'fillcolor="{"#eef3fa" if i % 2 else "#f7f7f7"}";']  # fmt: skip
    for room in rooms:
        count = house.rooms[room]
        lines.append(f'  {node[room]} [label="{label(room)}\\n{count} module'
                     f'{"" if count == 1 else "s"}"];')  # fmt: skip
    lines += ["}", f"a{i} [shape=point, style=invis];"]
    lines += [f"{node[r]} -> a{i} [style=invis];" for r in rooms]
    lines += [f"a{i - 1} -> {node[r]} [style=invis];" for r in rooms] if i else []
    return lines


def _arrow(tail: str, head: str, count: int, style: str) -> str:
    width = min(0.6 + count / 4, 5.0)
    return f'{tail} -> {head} [penwidth={width:.1f}, label="{count}", fontsize=9, {style}];'


def caption(house: House, title: str, every_arrow: bool) -> str:
    summed = "" if every_arrow else ", gray ones between floors summed per pair of floors"
    roots = ", ".join(f"{f} {house.root_modules(f)}" for f in FLOORS)
    cycles = "; ".join(" ↔ ".join(label(r) for r in g) for g in house.cycles()) or "none"
    return (f"{title}: {len(house.rooms)} rooms, {len(house.arrows)} arrows (label: imports); "
            f"red: {len(house.upward())} upward, room circles: {cycles}{summed}\\n"
            f"modules at each floor's root (__init__ counted): {roots}")  # fmt: skip


def table(houses: dict[str, House]) -> str:
    """Markdown: a row per count, a column per revision."""
    names = list(houses)
    rows = [("rooms (faces counted)", lambda h: len(h.rooms))]
    rows += [(f"modules at `{f}/`'s root (`__init__` counted)",
              lambda h, f=f: h.root_modules(f)) for f in FLOORS]  # fmt: skip
    rows += [("room→room arrows", lambda h: len(h.arrows)),
             ("module imports behind them", lambda h: sum(h.arrows.values())),
             ("upward arrows", lambda h: len(h.upward())),
             ("room circles", lambda h: len(h.cycles()))]  # fmt: skip
    out = ["| what | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    out += [f"| {what} | " + " | ".join(str(count(houses[n])) for n in names) + " |"
            for what, count in rows]  # fmt: skip
    for name, house in houses.items():
        out += [f"{name}: upward {label(a)} → {label(b)}" for a, b in house.upward()]
        out += [f"{name}: circle " + " ↔ ".join(label(r) for r in g) for g in house.cycles()]
    return "\n".join(out)


def read_revision(rev: str) -> dict[str, str]:
    """{path under src/execrl: source} of every module at a revision."""
    listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, PACKAGE],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    paths = [p for p in listing.splitlines() if p.endswith(".py")]
    return {p.removeprefix(PACKAGE + "/"): subprocess.run(["git", "show", f"{rev}:{p}"],
            capture_output=True, text=True, check=True).stdout for p in paths}  # fmt: skip


def render(dot: str, stem: Path) -> list[Path]:
    """PNG always; SVG too while it stays small enough to keep in the repository."""
    written = []
    for fmt in ("png", "svg"):
        out = stem.with_suffix(f".{fmt}")
        subprocess.run(["dot", f"-T{fmt}", "-o", str(out)], input=dot, text=True, check=True)
        if fmt == "svg" and out.stat().st_size > SVG_LIMIT:
            out.unlink()
            continue
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="+", metavar="NAME=REV")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where house_NAME goes")
    parser.add_argument("--every-arrow", action="store_true", help="room to room across floors")
    args = parser.parse_args(argv)
    houses = {}
    for pair in args.revisions:
        name, _, rev = pair.partition("=")
        houses[name] = build_house(read_revision(rev or name))
        # the commit, not a name such as HEAD that moves on, is what the picture shows
        commit = subprocess.run(["git", "rev-parse", "--short", rev or name],
                                capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dot = dot_source(houses[name], f"{name} ({commit})", args.every_arrow)
        written = render(dot, args.out / f"house_{name}")
        print("wrote", ", ".join(str(p) for p in written), file=sys.stderr)
    print(table(houses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
