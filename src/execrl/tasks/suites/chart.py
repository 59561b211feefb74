"""The `chart` suite: write a matplotlib program that draws the chart described.

Level 1: a bar chart of categories with a title. Level 2: a line chart with a title and axis
labels. Level 3: two labelled series (two lines, or a line and a scatter) with a legend, title
and axis labels. The reference program draws exactly that; the wrong one gets one thing wrong
(a value, the kind of chart, or a label).
"""

from __future__ import annotations

import random
from pathlib import Path

from execrl.tasks.schema import Task, VerifierTests

TOPICS = ("Sales", "Visitors", "Rainfall", "Downloads", "Orders", "Signups")
CATEGORIES = ("north", "south", "east", "west", "online", "retail", "export")
YEARS = (2018, 2019, 2020, 2021, 2022, 2023, 2024)


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    topic = rng.choice(TOPICS)
    if level == 1:
        cats = rng.sample(CATEGORIES, rng.randint(3, 5))
        values = [rng.randint(1, 40) for _ in cats]
        prompt = (
            f"Draw a bar chart with one bar per category, categories {cats} (in this order) "
            f"with heights {values}, titled '{topic} by region'."
        )
        ref = f"plt.bar({cats!r}, {values!r})\nplt.title({topic + ' by region'!r})\n"
        wrong_values = list(values)
        wrong_values[rng.randrange(len(values))] += 1
        wrong = f"plt.bar({cats!r}, {wrong_values!r})\nplt.title({topic + ' by region'!r})\n"
    elif level == 2:
        years = list(YEARS[: rng.randint(4, 7)])
        values = [rng.randint(0, 100) for _ in years]
        prompt = (
            f"Draw a line chart of {topic.lower()} per year: x = {years}, y = {values}. Title "
            f"it '{topic} per year', label the x axis 'year' and the y axis '{topic.lower()}'."
        )
        labels = (
            f"plt.title({topic + ' per year'!r})\nplt.xlabel('year')\n"
            f"plt.ylabel({topic.lower()!r})\n"
        )
        ref = f"plt.plot({years!r}, {values!r})\n" + labels
        wrong = f"plt.bar({years!r}, {values!r})\n" + labels
    else:
        xs = list(range(1, rng.randint(5, 8)))
        first = [rng.randint(0, 50) for _ in xs]
        second = [rng.randint(0, 50) for _ in xs]
        kind = rng.choice(("line", "scatter"))
        draw2 = "plt.plot" if kind == "line" else "plt.scatter"
        prompt = (
            f"Draw two series against x = {xs}: a line labelled 'plan' with y = {first}, and a "
            f"{kind} labelled 'actual' with y = {second}. Add a legend, the title "
            f"'{topic}: plan and actual', and the axis labels 'week' (x) and "
            f"'{topic.lower()}' (y)."
        )
        common = (
            f"plt.legend()\nplt.title({topic + ': plan and actual'!r})\nplt.xlabel('week')\n"
            f"plt.ylabel({topic.lower()!r})\n"
        )
        ref = (
            f"plt.plot({xs!r}, {first!r}, label='plan')\n"
            f"{draw2}({xs!r}, {second!r}, label='actual')\n" + common
        )
        wrong = (
            f"plt.plot({xs!r}, {first!r}, label='plan')\n"
            f"{draw2}({xs!r}, {second!r}, label='actuals')\n" + common
        )
    head = "import matplotlib.pyplot as plt\n"
    prompt += (
        "\nWrite a Python program using matplotlib.pyplot that draws it in the current figure "
        "(one axes; do not close the figure or call plt.show). Answer with the program in a "
        "``` block."
    )
    return Task(
        id="",
        prompt=prompt,
        tests=VerifierTests("chart", {"reference": head + ref}, head + wrong),
        reference=head + ref,
    )
