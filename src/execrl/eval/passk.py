"""pass@k, the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
on Code", arXiv 2107.03374, eq. 1 and the numerically stable product form of its Figure 3)."""

from __future__ import annotations

from collections.abc import Iterable


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct.

    1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k / i), which never forms the huge
    binomials."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean over tasks of pass@k, from (n samples, c correct) per task."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        raise ValueError("pass@k over zero tasks")
    return sum(values) / len(values)
