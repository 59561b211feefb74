"""Reward trees and the one scoring path: the combinators (`compose`), trees and scorer options
from TOML (`config`), and the scorer (`scorer`: programs built, run in the sandbox as the task's
tests are graded, `grading`; analyses run ahead, `analyser`), with what it applies around a tree:
hack flags and penalties (`hacks`), token credit (`token_credit`), verifier noise (`noise`) and
the per-step counts of flags (`monitor`)."""
