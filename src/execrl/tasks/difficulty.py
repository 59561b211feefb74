"""One difficulty scale for every task source: level 1 (easy) to 5 (hardest), 0 for unknown.

Each dataset names difficulty its own way (`Task.metadata["difficulty"]`, as its loader keeps
it); a curriculum needs one ordering across them. The scale follows CodeContests' own enum
(EASY 1, MEDIUM 2, HARD 3, HARDER 4, HARDEST 5), and a word means the same level in every
dataset, so "hard" is 3 whether LiveCodeBench, KodCode or TACO says it:

| where the level comes from | level |
|---|---|
| synthetic suite `difficulty` 1-5, verifier suites 1-3, CodeContests 1-5 | the number itself |
| easy, introductory (APPS) | 1 |
| medium, interview (APPS) | 2 |
| hard, medium_hard (TACO), competition (APPS) | 3 |
| harder, very_hard (TACO) | 4 |
| hardest | 5 |
| CodeContests 7+ (Codeforces problem letters A, B, ...; PrimeIntellect keeps them as "7") | A 1 .. D 4, E and later 5 |
| absent, "", unknown, unknown_difficulty, CodeContests 0 (UNKNOWN) and 6 (EXTERNAL) | 0 |

Known departures: TACO's five words land on four levels (MEDIUM_HARD and HARD both 3), and a
Codeforces letter is only the problem's place in its round, not a rating.
"""

from __future__ import annotations

from typing import Any

MAX_LEVEL = 5
UNKNOWN = 0

_WORDS = {
    "easy": 1,
    "introductory": 1,
    "medium": 2,
    "interview": 2,
    "hard": 3,
    "medium_hard": 3,
    "competition": 3,
    "harder": 4,
    "very_hard": 4,
    "hardest": 5,
}
_UNKNOWN_WORDS = frozenset({"", "unknown", "unknown_difficulty", "none", "null"})
_CODEFORCES_A = 7  # CodeContests' enum: 0 UNKNOWN, 1-5 EASY..HARDEST, 6 EXTERNAL, 7 = letter A


def difficulty_level(value: Any) -> int:
    """The level (0-5) of a dataset's difficulty value; ValueError for a value the scale does
    not know (the caller names the task)."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"difficulty {value!r} is neither a number nor a word")
    if isinstance(value, str):
        word = value.strip().lower().replace("-", "_").replace(" ", "_")
        if word in _UNKNOWN_WORDS:
            return UNKNOWN
        if word in _WORDS:
            return _WORDS[word]
        if not word.isdigit():
            raise ValueError(
                f"difficulty {value!r} is not on the scale (known words: {', '.join(_WORDS)})"
            )
        value = int(word)
    if 1 <= value <= MAX_LEVEL:
        return value
    if value >= _CODEFORCES_A:
        return min(MAX_LEVEL, value - _CODEFORCES_A + 1)
    if value in (0, 6):
        return UNKNOWN
    raise ValueError(f"difficulty {value!r} is not on the scale (numbers 0-5, or 7+)")
