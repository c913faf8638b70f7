"""Metadata filters: which chunks each question may retrieve, one mask per distinct filter.

Questions share a handful of filters, so the masks are stored once per filter and each question
points at its own; a (questions, chunks) matrix is formed only for the batch being ranked
(10,000 questions over a million chunks would otherwise be 10 GB of booleans).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from sweep.cache import content_key


@dataclass(frozen=True)
class Filters:
    """Per question, the chunks it may retrieve.

    Args:
        masks: ``(distinct filters, chunks)`` bool, True where a chunk passes.
        group: ``(questions,)`` int64, each question's row of ``masks``.

    Example:
        >>> f = Filters.build(["red", "any", "red"], lambda k: np.array([k == "any", True]))
        >>> f[1:].dense().tolist()
        [[True, True], [False, True]]
    """

    masks: np.ndarray
    group: np.ndarray

    @classmethod
    def build(cls, keys: list[Hashable], mask_of: Callable[[Hashable], np.ndarray]) -> Filters:
        """One mask per distinct key (``mask_of(key)``: a bool array over the chunks), in first-seen order.

        Args:
            keys: each question's filter, as a hashable key.
            mask_of: the chunks that pass a key's filter.

        Returns:
            The filters of the questions, in order.

        Example:
            >>> Filters.build(["a", "b", "a"], lambda k: np.array([k == "a"])).group.tolist()
            [0, 1, 0]
        """
        row: dict[Hashable, int] = {}
        group = np.fromiter((row.setdefault(k, len(row)) for k in keys), np.int64, len(keys))
        masks = np.stack([np.asarray(mask_of(k), dtype=bool) for k in row]) if row else np.zeros((0, 0), bool)
        return cls(masks, group)

    def __len__(self) -> int:
        return len(self.group)

    def __getitem__(self, rows: slice | np.ndarray) -> Filters:
        """The filters of questions ``rows`` (a slice or an index array); the masks are shared, not copied."""
        return Filters(self.masks, np.atleast_1d(self.group[rows]))

    def dense(self) -> np.ndarray:
        """The ``(questions, chunks)`` mask: take a batch (``filters[a:b]``) first."""
        return self.masks[self.group]

    def passes_all(self) -> np.ndarray:
        """Per question, True where its filter lets every chunk through (it is searched unfiltered)."""
        return self.masks.all(axis=1)[self.group]

    def key(self) -> str:
        """A content key for caches: equal filters give equal keys."""
        return content_key(np.packbits(self.masks, axis=1).tobytes(), self.masks.shape, self.group.tobytes())
