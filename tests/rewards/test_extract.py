"""Code extraction from model output."""

from __future__ import annotations

from execrl.rewards import extract_code


def check(text: str, expected: str | None, entry: str | None = "f") -> None:
    got = extract_code(text, entry)
    if expected is None:
        assert got is None
        return
    assert got is not None and got.code == expected
    assert text[got.start : got.end] == got.code  # the span points into the completion


def test_fence_with_and_without_language_tag():
    check("```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n")
    check("Sure!\n```\ndef f():\n    return 1\n```\nDone.", "def f():\n    return 1\n")
    check("```py\nx = 1\n```", "x = 1\n")


def test_prose_without_fences():
    check("def f(x):\n    return x\n", "def f(x):\n    return x\n")
    text = "Here is my answer.\ndef f(x):\n    return x\nThis works because it returns x."
    check(text, "def f(x):\n    return x\n")


def test_reasoning_blocks_are_skipped():
    text = "<think>```python\ndef f():\n    return 0\n```</think>\n```python\ndef f():\n    return 1\n```"
    check(text, "def f():\n    return 1\n")
    check("<think>def f():\n    return 0\n", None)  # unclosed reasoning: nothing else
    check("<think>hmm</think>\ndef f():\n    return 1\n", "\ndef f():\n    return 1\n")


def test_several_blocks_prefer_the_entry_point_then_the_last():
    text = "```python\ndef f():\n    return 1\n```\nExample:\n```python\nprint(f())\n```"
    check(text, "def f():\n    return 1\n")
    check(text, "print(f())\n", entry=None)
    check("```bash\npip install x\n```\n```python\ny = 2\n```", "y = 2\n")


def test_truncated_or_foreign_fences_are_no_code():
    check("```python\ndef f():\n    return", None)
    check("```js\nlet x = 1\n```", None)
    check("I cannot do that.", None)


def test_a_block_tagged_with_the_tasks_language_is_its_answer():
    # SmolLM2-135M-Instruct writes ```sql although the sql suite's prompt asks for no tag
    answer = "```sql\nSELECT name FROM employees;\n```\n\nThis lists the names."
    assert extract_code(answer, language="sql").code == "SELECT name FROM employees;\n"
    cpp = "```c++\nint main() { return 0; }\n```"
    assert extract_code(cpp, language="cpp").code == "int main() { return 0; }\n"
    assert extract_code("```sv\nmodule m; endmodule\n```", language="verilog") is not None


def test_a_block_in_another_language_is_not_the_answer():
    sql = "```sql\nSELECT 1;\n```"
    assert extract_code(sql) is None  # a Python task
    python = "```python\nprint(1)\n```"
    assert extract_code(python, language="sql") is None
    # an untagged block counts for every language; the prose fallback reads Python only
    assert extract_code("```\nSELECT 1;\n```", language="sql").code == "SELECT 1;\n"
    assert extract_code("SELECT 1;", language="sql") is None
    assert extract_code("x = 1\n") is not None


def test_the_scorer_and_eval_take_the_tasks_language_from_the_task():
    from execrl.eval.solution import solution_from
    from execrl.rewards.scoring.scorer import build_sample
    from execrl.tasks.catalog.registry import load_benchmark

    task = load_benchmark("sql:split=test,n=1")[0]
    answer = "```sql\nSELECT 1;\n```\nThis selects one."
    assert build_sample(task, answer).program == "SELECT 1;\n"
    assert solution_from(task, answer, chat=True) == "SELECT 1;\n"
