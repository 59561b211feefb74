"""The `sql` suite: questions about a small company database, answered with one SQLite query.

Level 1 filters and counts, level 2 groups and orders, level 3 joins two tables (and groups).
Each task's database is drawn at random; the expected rows come from running the gold query
here, on an in-memory copy (our own query, never a candidate's), and the wrong solution is a
near miss that must give other rows on that database.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

from execrl.tasks.schema import Task, VerifierTests

SCHEMA = (
    "CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary INTEGER, "
    "age INTEGER)",
    "CREATE TABLE departments (name TEXT PRIMARY KEY, city TEXT, budget INTEGER)",
)
NAMES = (
    "Ada Alan Barbara Claude Dennis Edsger Frances Grace Hedy Ken Linus Margaret Niklaus "
    "Radia Shafi Tim Whitfield Yukihiro"
).split()
DEPTS = ("sales", "research", "support", "finance", "legal")
CITIES = ("Lyon", "Oslo", "Porto", "Kyoto")

# (level, question, gold, wrong): templates filled with values drawn from the database
QUESTIONS: tuple[tuple[int, str, str, str], ...] = (
    (1, "List the names of the employees of the {dept} department.",
     "SELECT name FROM employees WHERE dept = '{dept}'",
     "SELECT name FROM employees WHERE dept <> '{dept}'"),
    (1, "How many employees earn more than {salary}?",
     "SELECT COUNT(*) FROM employees WHERE salary > {salary}",
     "SELECT COUNT(*) FROM employees WHERE salary >= {salary}"),
    (1, "List the names and ages of the employees older than {age}, oldest first.",
     "SELECT name, age FROM employees WHERE age > {age} ORDER BY age DESC, name",
     "SELECT name, age FROM employees WHERE age > {age} ORDER BY age ASC, name"),
    (2, "For each department with employees, give its name and its number of employees.",
     "SELECT dept, COUNT(*) FROM employees GROUP BY dept",
     "SELECT dept, COUNT(*) FROM employees WHERE salary > {salary} GROUP BY dept"),
    (2, "Give each department's name and average salary, highest average first.",
     "SELECT dept, AVG(salary) FROM employees GROUP BY dept ORDER BY AVG(salary) DESC",
     "SELECT dept, AVG(salary) FROM employees GROUP BY dept ORDER BY AVG(salary) ASC"),
    (2, "Give the name and salary of the best paid employee aged {age} or less.",
     "SELECT name, salary FROM employees WHERE age <= {age} ORDER BY salary DESC LIMIT 1",
     "SELECT name, salary FROM employees ORDER BY salary DESC LIMIT 1"),
    (3, "List the names of the employees who work in a department located in {city}.",
     "SELECT e.name FROM employees e JOIN departments d ON e.dept = d.name "
     "WHERE d.city = '{city}'",
     "SELECT e.name FROM employees e JOIN departments d ON e.dept = d.name "
     "WHERE d.city <> '{city}'"),
    (3, "Which departments pay more in total salaries than their budget? Give their names.",
     "SELECT d.name FROM departments d JOIN employees e ON e.dept = d.name "
     "GROUP BY d.name HAVING SUM(e.salary) > d.budget",
     "SELECT d.name FROM departments d JOIN employees e ON e.dept = d.name "
     "GROUP BY d.name HAVING SUM(e.salary) < d.budget"),
    (3, "For each city, give the city and the number of employees working there, by city name.",
     "SELECT d.city, COUNT(*) FROM employees e JOIN departments d ON e.dept = d.name "
     "GROUP BY d.city ORDER BY d.city",
     "SELECT d.city, COUNT(e.id) FROM departments d LEFT JOIN employees e ON e.dept = d.name "
     "GROUP BY d.city ORDER BY d.city DESC"),
)  # fmt: skip


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    rows = _database(rng)
    question, gold, wrong = rng.choice([q[1:] for q in QUESTIONS if q[0] == level])
    employees = rows["employees"]
    values = {
        "dept": rng.choice(employees)[2],
        "salary": rng.choice(employees)[3],
        "age": rng.choice(employees)[4],
        "city": rng.choice(rows["departments"])[1],
    }
    gold, wrong, question = (s.format(**values) for s in (gold, wrong, question))
    expected, got_wrong = run_query(rows, gold), run_query(rows, wrong)
    ordered = "ORDER BY" in gold.upper() and "LIMIT 1" not in gold.upper()
    if not expected or _same(expected, got_wrong, ordered):
        return None  # an empty answer teaches little; a wrong query must be wrong here
    spec = {"schema": list(SCHEMA), "rows": rows, "expected": expected, "ordered": ordered}
    return Task(
        id="",
        prompt=_prompt(rows, question),
        tests=VerifierTests("sql", spec, wrong + "\n"),
        language="sql",
        reference=gold + "\n",
    )


def _database(rng: random.Random) -> dict[str, list[list[Any]]]:
    depts = rng.sample(DEPTS, rng.randint(3, 4))
    names = rng.sample(NAMES, rng.randint(6, 10))
    employees = [
        [i + 1, name, rng.choice(depts), rng.randrange(30, 90) * 1000, rng.randint(22, 64)]
        for i, name in enumerate(names)
    ]
    departments = [[d, rng.choice(CITIES), rng.randrange(60, 240) * 1000] for d in depts]
    return {"employees": employees, "departments": departments}


def run_query(rows: dict[str, list[list[Any]]], query: str) -> list[list[Any]]:
    """The gold answer: our own query on an in-memory database."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in SCHEMA:
            conn.execute(statement)
        for table, data in rows.items():
            marks = ",".join("?" * len(data[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", data)
        return [list(r) for r in conn.execute(query).fetchall()]
    finally:
        conn.close()


def _same(a: list[list[Any]], b: list[list[Any]], ordered: bool) -> bool:
    if ordered:
        return a == b
    return sorted(map(repr, a)) == sorted(map(repr, b))


def _prompt(rows: dict[str, list[list[Any]]], question: str) -> str:
    schema = ";\n".join(SCHEMA)
    return (
        f"A SQLite database has these tables:\n\n{schema};\n\n"
        f"It holds {len(rows['employees'])} employees and {len(rows['departments'])} "
        f"departments.\n\nQuestion: {question}\n\n"
        "Answer with one SQLite SELECT statement in a ``` block without a language tag."
    )
