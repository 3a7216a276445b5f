"""A reservoir sample: a uniform random sample of fixed size k of all the rows offered so far, with Algorithm L's
skip distances, so a batch costs O(rows accepted), not O(rows offered) (issue 14 item 3; digest-004 R-APX-04:
keep a sample of the synopsis contents).

Source: Vitter, "Random sampling with a reservoir" (ACM TOMS 1985): after n offers every offered row is in the
sample with probability k/n; Li, "Reservoir-sampling algorithms of time complexity O(n(1 + log(N/n)))" (ACM
TOMS 1994), Algorithm L: W = exp(log(U)/k) and the next accepted offer is floor(log(U) / log(1 - W)) + 1 later,
U uniform on (0, 1), W multiplied by exp(log(U)/k) after each acceptance.

Scaling. A COUNT or SUM over the sample estimates the one over all n rows when multiplied by n / size
(``scale``): each row is in the sample with probability size / n, so this is the Horvitz-Thompson estimator,
unbiased; ``sampled_fraction`` is size / n, what an approximate result reports.
"""

from __future__ import annotations

import math

import numpy as np


class ReservoirSample:
    """Which offered rows a size-k reservoir keeps, and which slot each one takes.

    ``offer(m)`` offers the next m rows (numbered ``seen`` .. ``seen + m - 1``) and returns the offsets (within
    the m) of the rows accepted, in order, and the slot (0 .. k-1) each one fills; a row accepted into a taken
    slot evicts the row that was there. The caller keeps the rows (columns indexed by slot).

    >>> r = ReservoirSample(3, seed=1)
    >>> r.offer(3)[0].tolist(), r.size, r.seen
    ([0, 1, 2], 3, 3)
    >>> taken, slots = r.offer(1000); bool(len(taken) < 100 and r.size == 3 and r.seen == 1003)
    True
    """

    def __init__(self, k: int, seed: int | None = None) -> None:
        if k < 1:
            raise ValueError(f"a reservoir holds at least one row, not {k}")
        self.k = k
        self.rng = np.random.default_rng(seed)
        self.seen = 0                    # rows offered so far (n)
        self.size = 0                    # rows held (min(k, n))
        self.w = 1.0
        self.next = 0                    # number of the next row to accept

    def _u(self) -> float:
        u = self.rng.random()
        return u if u > 0 else 1e-300

    def _skip(self) -> None:
        self.w *= math.exp(math.log(self._u()) / self.k)
        self._jump()

    def _jump(self) -> None:
        """Set ``next`` to the next accepted offer: the first after ``next`` whose priority is below ``w``."""
        if self.w >= 1.0:
            self.next += 1
            return
        self.next += int(math.floor(math.log(self._u()) / math.log1p(-self.w))) + 1

    def _full(self) -> None:
        """The reservoir has just filled after ``seen`` offers: ``w`` is the largest of the k smallest of
        ``seen`` uniform priorities. After exactly k offers that is max of k uniforms (U^(1/k), Algorithm L's
        start); after more (a ``restart``) it is the k-th order statistic of ``seen``, Beta(k, seen - k + 1),
        independent of which rows are held."""
        self.next = self.seen - 1
        if self.seen == self.k:
            self.w = 1.0
            self._skip()
            return
        self.w = float(self.rng.beta(self.k, self.seen - self.k + 1))
        self._jump()

    def restart(self, seen: int, size: int) -> None:
        """Go on as a reservoir that has been offered ``seen`` rows and holds ``size`` of them, a uniform sample
        given its size: what a sample over a window is after rows left it and others replaced them
        (``synopses.window_sample``). Later offers are accepted as if the reservoir had seen only these."""
        if not 0 <= size <= min(self.k, seen):
            raise ValueError(f"a reservoir of {self.k} rows offered {seen} cannot hold {size}")
        self.seen, self.size = seen, size
        if size == self.k:
            self._full()

    def offer(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        taken: list[int] = []
        slots: list[int] = []
        start, end = self.seen, self.seen + m
        while self.size < self.k and self.seen < end:          # filling: every row is taken
            taken.append(self.seen - start)
            slots.append(self.size)
            self.size += 1
            self.seen += 1
            if self.size == self.k:
                self._full()
        while self.size == self.k and self.next < end:
            taken.append(self.next - start)
            slots.append(int(self.rng.integers(self.k)))
            self._skip()
        self.seen = end
        return np.asarray(taken, dtype=np.int64), np.asarray(slots, dtype=np.int64)

    def sampled_fraction(self) -> float:
        """The probability that an offered row is in the sample (1.0 before the reservoir is full)."""
        return self.size / self.seen if self.seen else 1.0

    def scale(self) -> float:
        """The factor that turns a COUNT or SUM over the sample into an unbiased estimate over every row."""
        return 1.0 / self.sampled_fraction()


class ReservoirRows:
    """A reservoir sample of rows kept as numpy columns indexed by slot: the sampled state a synopsis of kind
    ``reservoir`` holds (bounded by k rows whatever the input).

    >>> s = ReservoirRows(2, [np.dtype(np.int64)], seed=0)
    >>> _ = s.add([np.arange(10)]); len(s.rows()[0]), round(s.estimate_count(), 6)
    (2, 10.0)
    """

    def __init__(self, k: int, dtypes: list, seed: int | None = None) -> None:
        self.sampler = ReservoirSample(k, seed)
        self.cols = [np.empty(k, dtype=dt) for dt in dtypes]

    def add(self, cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Offer a batch of rows; returns (offsets taken, slots). Later rows overwrite earlier ones into the
        same slot, in order, as offering them one by one would."""
        n = len(cols[0]) if cols else 0
        taken, slots = self.sampler.offer(n)
        for dst, src in zip(self.cols, cols):
            dst[slots] = src[taken]             # numpy assigns in order: the last write to a slot wins
        return taken, slots

    def rows(self) -> list[np.ndarray]:
        return [c[: self.sampler.size] for c in self.cols]

    def estimate_count(self) -> float:
        return self.sampler.size * self.sampler.scale()

    def estimate_sum(self, j: int) -> float:
        return float(self.rows()[j].sum()) * self.sampler.scale()

    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.cols)
