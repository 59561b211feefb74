"""A progress bar on stderr, silent when stderr is not a terminal (CI logs, pipes)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm


@contextmanager
def progress_bar(total: int, desc: str) -> Iterator[Callable[[int], None]]:
    bar = tqdm(
        total=total,
        desc=desc,
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        unit="run",
        smoothing=0.1,
    )
    try:
        yield bar.update
    finally:
        bar.close()
