"""What stands between the test code and the candidate in assert-style tests.

The test code and the candidate share one interpreter, so the harness keeps the candidate's code
to the inside of its own calls and checks everything that crosses the boundary:

- `make_candidate`: what the tests call in place of the entry point. It is opaque: it has no
  closure and no globals worth having, and what it works with sits in its keyword defaults,
  which the audit hook lets no one read or replace. (A function the tests hand the candidate
  leads to the tests' globals, and from there to whatever the tests call.)
- Every value that crosses is plain data (`plain`) or it fails the test: the value returned, and
  every argument that was plain data when the candidate got it (so that nothing lying can be
  planted in a list the tests look at afterwards). A dict subclass is handed to the tests as
  the plain dict it stores.
- An exception the candidate raises never reaches the tests itself: they get a fresh one, of its
  built-in type made from its arguments if those are plain, otherwise of the nearest built-in
  type it derives from, with its message (`_crossing`). One that would steer the tests' control
  flow (StopIteration ending a `map` or `filter` early, StopAsyncIteration, GeneratorExit)
  reaches them as a RuntimeError, as PEP 479 does in generators.
- Nothing the candidate touched is freed while the test code runs (arguments, return values,
  exceptions and their tracebacks are kept until the run ends), the garbage collector is off
  outside the candidate's calls, and after each call its timers are cancelled and all its
  signal handlers undone: so no finalizer, weakref callback or signal handler of the candidate
  can run between the tests' lines, after the restore that follows each call.
- Threads: the candidate may start them, but none may outlive the call that started it (or the
  program's load). After every call, before anything is put back, the harness reads the
  kernel's count of the process's threads (the links of /proc/self/task, a descriptor opened
  before the candidate ran and checked by device and inode): another thread still there ends
  the run as a failure. A thread that has already finished in Python and is only leaving the
  kernel (a join just returned) is waited for. Once the count is one, nothing but the harness
  runs, so no timing can slip a change past the restore. New processes are denied by the audit
  hook unless the job allows them (a forked copy of the harness would go on with the tests).
- The tests' names are the trusted ones: helpers any task's prompt defines and the tests
  call (HumanEval/32's `poly`, /38's `encode_cyclic`, /50's `encode_shift`, or a user's own
  JSONL task's) come with the test code, as the prompt wrote them (`tasks.prompt_helpers`,
  applied as every Task is made), so a program that redefines them changes nothing the tests run. The rest of the namespace is made from the
  candidate's globals (its functions wrapped like the entry point), minus any that would shadow
  a builtin: `abs = lambda x: 0` at the candidate's top level is its own business; and a
  standard module the tests use without importing it (MBPP's `sys.getsizeof`) is the real one,
  whatever the candidate bound to that name.
- Objects of the tests handed to the candidate (a lambda, a method, an instance of a class the
  tests define) lead to the tests' globals, their classes and their closures. The functions of
  the tests cannot have their code or defaults replaced (the audit hook), and for such a call
  `leftovers.tests_world` takes the tests' namespace and builtins, the classes the tests define, the
  closure cells of their functions and of the functions handed over, and the class of each
  object handed over; after it, what changed is put back and the run fails.
- `restorer.make_restore`: after each call, the modules the tests use, their classes, the
  builtins and the import system are put back as they were (see there).

What is still open:
- Data the tests keep, reached through an object they hand over: the attributes of that
  object and of whatever it references, lists in the tests' globals, the mutable default of a
  test's function. The candidate can change them during the call (honest code may: an
  in-place algorithm on the tests' linked list); only the bindings, classes, closures and
  classes-of-arguments above are checked. Honest tests hand the candidate plain data.
- Mutable state inside the modules the tests use (a pattern planted in `re`'s cache, say): the
  restore compares each module's bindings, not what they hold.
- Tasks whose tests need objects back (`strict_returns=False`: QuixBugs' graph programs,
  MBPP's object-returning tasks) run methods of the candidate's objects inside the tests'
  lines, outside any call: that code can act on whatever it reached earlier, and what it
  bends and puts back before the next restore is not seen. A thread it starts there fails the
  run at the end of the test.
- Classes the program defines and the tests construct (MBPP's `Pair`, `Node`) run the
  program's `__init__` in the tests' lines; the restore before each test undoes module changes.
- Program code the tests run outside a call (the `__init__` of a class above) may bind plain
  data or an output buffer or file in a module the tests use, and that is then taken for the
  tests' own change; a function or any other object it binds there is still found and undone.
- A callback of the tests that rebinds one of their globals or a closure cell while the
  candidate calls it fails the run (it cannot be told from the candidate doing it).
- Without /proc the thread count cannot be read: the harness then lowers the process limit so
  that no thread can start (which binds only where the run has its own uid).
"""

from __future__ import annotations

from execrl.sandbox.run import leftovers, plain, restorer

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

# Exceptions that end an iteration or a generator: they steer the code that catches them.
_CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit)
CHANGED_EXCEPTION = "the candidate changed the arguments of an exception it raised"
NOT_PLAIN_ARGUMENT = "the candidate put a value that is not plain data into one of its arguments"


def _template(*args: Any, _execrl_call: Any, **kwargs: Any) -> Any:
    return _execrl_call(args, kwargs)


# The code of what the tests call; made into a function per run by `make_candidate`.
CANDIDATE_CODE = _template.__code__


def make_candidate(state: dict[str, Any], fn: Any, strict: bool, name: str) -> Any:
    """What the tests call instead of the candidate's function `fn`.

    With `strict`, its return value and the arguments it got must be plain data."""
    p = state["p"]
    isolated: dict[str, Any] = {"__builtins__": {}}
    guarded = p["function_type"](p["candidate_code"], isolated, name)
    guarded.__qualname__ = name

    def dispatch(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _call(args, kwargs, fn, strict, state)

    guarded.__kwdefaults__ = {"_execrl_call": dispatch}
    state["extra_globals"].add(id(isolated))  # from now on its attributes cannot be set
    return guarded


def _call(
    args: tuple[Any, ...], kwargs: dict[str, Any], fn: Any, strict: bool, state: dict[str, Any]
) -> Any:
    p = state["p"]
    keep = state["keep"]
    given = (*args, *kwargs.values())
    plain_given = []  # containers to check again after the call
    exposed = not strict  # maybe an object of the tests: a way to their globals (docstring)
    for x in given:
        if plain.is_scalar(x):
            continue
        # Kept alive until the run ends, so that nothing the candidate hung on it (a finalizer,
        # a weakref callback) runs when the tests drop it. Scalars can carry neither: a test
        # calling a million times with numbers keeps nothing.
        keep.append(x)
        if not strict:
            continue
        if not plain.is_exact(x):
            exposed = True
        elif _container(x):
            plain_given.append(x)
    # What the tests' objects lead to, taken only when the candidate gets one (`tests_world`).
    world = leftovers.tests_world(state, given) if exposed else None
    if state["gc_enabled"]:
        p["gc_enable"]()
    crossing = None
    # Not inside another call (a callback of the tests calling the candidate again): there
    # the candidate's own changes would be taken for the tests'.
    if not state["dirty"] and not state["calls"]:
        state["rebase"]()
    state["calls"] += 1
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        keep.append((exc, _get_traceback(exc)))
        # Made here, before `_after_call`: it may run the candidate's code (its `__str__`),
        # which must not run after the restore, nor start a thread after the count.
        crossing = _crossing(exc)
    finally:
        state["calls"] -= 1
        _after_call(state, world)
    if crossing is not None:
        # A thread that ended before the count may have put something else into the plain
        # arguments the crossing shares with the candidate's exception.
        if not all(plain.is_exact(a) for a in _args(crossing)):
            crossing = RuntimeError(CHANGED_EXCEPTION).with_traceback(_get_traceback(crossing))
        # Raised here, not in the except clause, so that its __context__ is not the
        # candidate's own exception object.
        raise crossing
    if exposed:  # the tests hold objects of the candidate's, whose methods they may call
        state["dirty"] = True
    if not plain.is_scalar(value):
        keep.append(value)
    try:
        return _checked(value, plain_given, strict, state)
    except BaseException as exc:
        if state["nonplain"] is None:  # the check itself failed: out of memory, say
            state["broken"] = (_type_name(type(exc)), "the harness could not check a value")
        raise


def _container(x: Any) -> bool:
    """What the candidate could change in place (the only arguments worth checking after)."""
    t = type(x)
    return t is list or t is dict or t is set or t is tuple


def _after_call(state: dict[str, Any], world: Any) -> None:
    """Put the tests' world back. If that fails (the candidate left no memory, or a recursion
    limit too low to run this), the test fails: the tests may swallow the exception. Before
    anything is restored no thread of the candidate may be left (`leftovers.sole_thread`): one
    could act after the restore. Its signal handlers are undone before the count is taken (a
    handler could start a thread after it), and the collector is turned off again after it (a
    thread that ended meanwhile may have turned it on); other threads cannot set handlers."""
    p = state["p"]
    try:
        if p["getrecursionlimit"]() < p["recursion_limit"]:
            p["setrecursionlimit"](p["recursion_limit"])
        p["gc_disable"]()
        quiet(state)
        # `sole_thread`'s first look, inline: it runs after every call.
        tasks = state["tasks"]
        try:
            st = p["fstat"](tasks[0]) if tasks is not None else None
        except OSError:
            st = None
        if tasks is not None and (
            st is None or st.st_nlink != tasks[3] or st.st_ino != tasks[2] or st.st_dev != tasks[1]
        ):
            leftovers.sole_thread(state)
        p["gc_disable"]()
        state["restore"]()
        state["dirty"] = False
        if world is not None:
            _restore_dict(state["test_builtins"], p["builtins"], "the tests' builtins", state)
            leftovers.restore_world(world, state)
    except BaseException as exc:
        if state["broken"] is None:
            state["broken"] = (
                _type_name(type(exc)),
                "the harness could not restore the tests' world",
            )
        raise


def _checked(value: Any, plain_given: list[Any], strict: bool, state: dict[str, Any]) -> Any:
    for x in plain_given:
        if not plain.is_exact(x):
            state["nonplain"] = NOT_PLAIN_ARGUMENT
            raise AssertionError(NOT_PLAIN_ARGUMENT)
    if not strict:
        return value
    try:
        return plain.exact_copy(value)
    except MemoryError:
        raise
    except BaseException as exc:  # noqa: BLE001
        # NotPlainData, or whatever the candidate made of that class (its __str__, its
        # __new__): any failure here is a non-plain value, and `nonplain` must be set.
        state["dirty"] = True
        state["nonplain"] = message = describe(exc)
        raise AssertionError(message) from None


def _crossing(exc: BaseException) -> BaseException:
    """What the tests see of an exception the candidate raised: always a fresh one, with the
    candidate's traceback (for the line that raised). Of its own built-in type, made from its
    arguments if they are plain; otherwise of the nearest built-in type it derives from, with
    its message. Never the object itself: a built-in exception keeps more than its arguments
    (SyntaxError.msg, OSError.filename, UnicodeError.reason, __notes__, __cause__), which
    its __str__ and __repr__ read and the candidate may have set to objects of its own. (A test
    can catch a candidate's class by name only through the candidate, so it may not meet its
    class's methods.)"""
    cls = type(exc)
    tb = _get_traceback(exc)
    for steering in _CONTROL_FLOW:
        if issubclass(cls, steering):
            # It would end the tests' `map`, `filter`, `async for` or generator silently; PEP
            # 479 turns it into a RuntimeError in generators, and so does the boundary.
            message = f"the candidate raised {_text(_type_name(cls))}: {describe(exc)}"
            return RuntimeError(message).with_traceback(tb)
    if not cls.__flags__ & restorer.HEAPTYPE:
        args = _args(exc)
        if all(plain.is_exact(a) for a in args):
            try:
                return cls(*args).with_traceback(tb)
            except BaseException:  # noqa: BLE001 - a type whose __init__ wants more
                pass
    message = describe(exc)
    for base in _mro(cls):
        if not base.__flags__ & restorer.HEAPTYPE:
            try:
                return base(message).with_traceback(tb)
            except BaseException:  # noqa: BLE001 - a type that wants other arguments
                return RuntimeError(message).with_traceback(tb)
    return RuntimeError(message).with_traceback(tb)


def quiet(state: dict[str, Any]) -> None:
    """Cancel the candidate's timers and put every signal handler back as the worker had it.

    Every one: a signal the candidate set to arrive when I/O becomes possible (F_SETSIG) can be
    any signal at all. Repeated until nothing changed: a handler that runs during the loop may
    set another. A run can set no signal's action (`handler_filter`), so what is undone is the
    program's own table of timer handlers (`timer_signals`). A handler that differs all the
    same was set by a fresh `_signal` module from what the kernel says (never a function of
    the program's: SIGINT is ignored); putting it back is refused, and fails the run."""
    p = state["p"]
    setitimer, getsignal, set_handler = p["setitimer"], p["getsignal"], p["set_handler"]
    handlers, timer_handlers = p["handlers"], p["timer_handlers"]
    refused = False
    for _ in range(4):
        for timer in p["timers"]:
            setitimer(timer, 0)
        changed = bool(timer_handlers)
        timer_handlers.clear()
        for sig, handler in handlers:
            if getsignal(sig) is not handler:
                try:
                    set_handler(sig, handler)
                    changed = True
                except OSError:
                    refused = True
        if not changed:
            break
    if refused:
        state["tampered"].append("modified the signal module's handlers")


def _restore_dict(
    d: dict[str, Any], snap: dict[str, Any], what: str, state: dict[str, Any]
) -> None:
    if not restorer.differs(d, *restorer.fingerprint(snap)):
        return
    state["tampered"].append(f"modified {what}")
    d.clear()
    d.update(snap)


def describe(exc: BaseException) -> str:
    """An exception's message, whatever its __str__ does; at most MAX_MESSAGE characters."""
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = "<unprintable exception>"
    if type(text) is not str:
        return "<unprintable exception>"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE]


MAX_MESSAGE = 2000  # characters of an exception message kept


# Unbound descriptors: a candidate's exception class cannot override them with properties.
_get_traceback = BaseException.__dict__["__traceback__"].__get__
_type_name = restorer.type_name
_text = restorer.text
_mro = type.__dict__["__mro__"].__get__
_args = BaseException.__dict__["args"].__get__
