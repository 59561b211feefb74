"""`types.coroutine` without rewriting a function's code, so that `import asyncio` works in a
sandboxed run.

CPython's `types.coroutine` marks a generator function as an iterable coroutine by replacing its
code with `code.replace(co_flags=...)`, which raises the `code.__new__` audit event, and the
harness's audit hook refuses that event (hand-made code objects can read arbitrary memory; the
event does not say which fields changed, so a flag change cannot be told from new bytecode).
`asyncio.tasks` applies the decorator at import (`__sleep0`, `_wrap_awaitable`), so a right
answer using `asyncio.run` ended RUNTIME_ERROR. `coroutine` below takes, for generator
functions too, the path CPython takes for any other callable that returns a generator: each
generator it returns is wrapped as awaitable (`types._GeneratorWrapper`). `await` and
`yield from` behave as they did; `inspect.isgeneratorfunction` of the decorated function is
False. Installed in the worker once, before any run (`worker._setup`), so it is the `types`
module's binding the restore puts back after every call.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Coroutine, Generator

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_CO_COROUTINES = 0x180  # CO_COROUTINE | CO_ITERABLE_COROUTINE
_CO_ITERABLE_COROUTINE = 0x100


def coroutine(func: Callable[..., Any]) -> Callable[..., Any]:
    """Convert regular generator function to a coroutine."""  # types.coroutine's own words
    if not callable(func):
        raise TypeError("types.coroutine() expects a callable")
    code = getattr(func, "__code__", None)
    if type(func) is types.FunctionType and type(code) is types.CodeType:
        if code.co_flags & _CO_COROUTINES:
            return func

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        coro = func(*args, **kwargs)
        if type(coro) is types.CoroutineType or (
            type(coro) is types.GeneratorType and coro.gi_code.co_flags & _CO_ITERABLE_COROUTINE
        ):
            return coro
        if isinstance(coro, Generator) and not isinstance(coro, Coroutine):
            return types._GeneratorWrapper(coro)  # type: ignore[attr-defined]
        return coro

    return wrapped


def install(types_module: types.ModuleType) -> None:
    """Make `coroutine` the `types` module's."""
    types_module.coroutine = coroutine  # type: ignore[attr-defined]
