"""benchmarks/draw_house.py finds the rooms, the upward arrows and the circles of a package built
by hand (three floors, sources as text: no git, no Graphviz)."""

from __future__ import annotations

from script_helpers import load_script

FACE, ROOT = "(face)", "(root)"

# tasks (a face, its root, the wing suites) < models (root only) < eval (root only). models/hub
# reaches up to eval inside a function; tasks' root and suites import each other, suites through
# a relative import inside a function.
PACKAGE = {
    "tasks/__init__.py": "from execrl.tasks.schema import Task\n",
    "tasks/schema.py": "from execrl.tasks.suites import sql\n",
    "tasks/suites/__init__.py": "",
    "tasks/suites/sql.py": "def build():\n    from ..schema import Task\n",
    "models/__init__.py": "",
    "models/loading.py": "import execrl.tasks.schema\n",
    "models/hub.py": "def fetch():\n    from execrl.eval import passk\n",
    "eval/__init__.py": "",
    "eval/passk.py": "from execrl.tasks import Task\nfrom execrl.tasks.suites import sql, build\n",
}


def _script():
    return load_script("draw_house")


def test_the_house_has_the_rooms_arrows_and_circle_built():
    draw = _script()
    house = draw.build_house(PACKAGE)
    tasks, suites, models, evals = (
        ("tasks", ROOT),
        ("tasks", "suites"),
        ("models", ROOT),
        ("eval", ROOT),
    )
    assert dict(house.rooms) == {("tasks", FACE): 1, tasks: 1, suites: 2, models: 3, evals: 2}
    assert house.root_modules("tasks") == 2
    assert dict(house.arrows) == {
        (("tasks", FACE), tasks): 1,
        (tasks, suites): 1,
        (suites, tasks): 1,
        (models, tasks): 1,
        (models, evals): 1,
        (evals, ("tasks", FACE)): 1,
        (evals, suites): 2,  # `sql` the module and `build` from the wing's __init__
    }
    # tasks' root below its wing suites (the wing order of test_layering.py): its import goes up
    assert sorted(house.upward()) == sorted([(models, evals), (tasks, suites)])
    assert house.cycles() == [[tasks, suites]]
    assert draw.dot_source(house, "fake").count(", color=red") == 3


def test_a_wing_importing_against_the_wing_order_goes_up():
    draw = _script()
    assert draw.goes_up(("sandbox", "run"), ("sandbox", "service"))
    assert not draw.goes_up(("sandbox", "service"), ("sandbox", "run"))
    assert draw.goes_up(("sandbox", "service"), ("sandbox", FACE))
