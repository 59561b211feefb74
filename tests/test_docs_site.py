"""The documentation: the site builds with no broken link or anchor (mkdocs.yml, strict), every
page a user reads by task starts with something to run, and the README stays a five-minute read
whose Quickstart is the two commands scripts/ and CI run (issue 30 item 6)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the pages about the project itself, not a task: no command to start them with
NOT_TASK_PAGES = {"ARCHITECTURE.md", "DEVELOPERS.md", "CHANGELOG.md"}


def needs_mkdocs() -> None:
    """Skip without mkdocs, except in CI (EXECRL_REQUIRE_TOOLS=1, set by .ci/run)."""
    missing = [m for m in ("mkdocs", "material") if importlib.util.find_spec(m) is None]
    if missing:
        message = f"{', '.join(missing)} not installed: pip install -e '.[docs]'"
        if os.environ.get("EXECRL_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def test_the_docs_site_builds_with_no_broken_link_or_anchor(tmp_path):
    needs_mkdocs()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "results" / "index.html").is_file()


def test_every_task_page_starts_with_a_code_block():
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name in NOT_TASK_PAGES:
            continue
        top = "\n".join(page.read_text().splitlines()[:30])
        assert re.search(r"^```|^\n    \S", top, re.M), f"{page}: no example in its first 30 lines"


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub and mkdocs' toc both make it for these headings."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_readme_reaches_a_file_and_heading():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert links
    for target, anchor in links:
        path = ROOT / target
        assert path.is_file(), f"README.md links to {target}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", path.read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, (
                f"README.md: no heading {anchor} in {target}"
            )


def test_the_readme_is_short_and_its_quickstart_is_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    quickstart = re.search(r"^## Quickstart\n(.*?)^## ", text, re.S | re.M)
    assert quickstart, "README.md lost its Quickstart section"
    commands = re.search(r"```bash\n(.*?)```", quickstart.group(1), re.S)
    assert commands, "README.md's Quickstart lost its commands"
    lines = [line.split("#")[0].strip() for line in commands.group(1).splitlines()]
    assert lines == ["bash scripts/demo.sh", "bash scripts/test.sh"]
