"""Statistics and discrepancies for posterior predictive checks.

A *statistic* ``T(y)`` is a function of one data set; a *discrepancy*
``T(y, params)`` also takes the parameters the replicate was drawn from
(``pi``, ``theta`` and the items' true classes ``z``).  Either returns a
number or a 1-d array (a *vector* statistic, e.g. a histogram), of the same
length for every data set.

:func:`pyrater.posterior_predictive_check` hands a statistic one of two
forms of the data:

* a :class:`Ratings` -- integer codes in numpy arrays, built without pandas
  (fast; every ready-made statistic here uses it);
* the long DataFrame (item, rater, rating, user labels) -- what a plain
  function receives, as in earlier versions.

Wrap a function in :class:`Statistic` or :class:`Discrepancy` to choose
(``data="ratings"`` or ``"frame"``), name it, or label its components.
Ready-made: :func:`vote_histogram`, :func:`category_shares`, :func:`pair_agreement`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

__all__ = [
    "Ratings",
    "DrawParameters",
    "Statistic",
    "Discrepancy",
    "vote_histogram",
    "category_shares",
    "pair_agreement",
]

DataForm = Literal["ratings", "frame"]


@dataclass(frozen=True, eq=False)
class Ratings:
    """One data set (observed or replicated) as integer codes.

    Attributes
    ----------
    item : int array, shape (R,)
        Item code ``0 .. n_items - 1`` of each rating.
    rater : int array, shape (R,)
        Rater code ``0 .. n_raters - 1``.
    rating : int array, shape (R,)
        Category code ``0 .. n_categories - 1``.
    item_labels : Index, length n_items
        The items' labels (grouped data: ``1 .. n_items`` in pattern order).
    rater_labels : Index, length n_raters
    categories : Index, length n_categories
        The rating scale (user labels, in code order).
    columns : tuple of str
        Names of the item, rater and rating columns of :meth:`frame`.

    Every replicate of a check shares ``item`` and ``rater`` with the
    observed data (the same design); only ``rating`` differs.
    """

    item: np.ndarray
    rater: np.ndarray
    rating: np.ndarray
    item_labels: pd.Index
    rater_labels: pd.Index
    categories: pd.Index
    columns: tuple[str, str, str] = ("item", "rater", "rating")

    @property
    def n_items(self) -> int:
        """Number of items."""
        return len(self.item_labels)

    @property
    def n_raters(self) -> int:
        """Number of raters."""
        return len(self.rater_labels)

    @property
    def n_categories(self) -> int:
        """Number of categories ``K``."""
        return len(self.categories)

    @property
    def n_ratings(self) -> int:
        """Number of ratings ``R``."""
        return int(self.rating.size)

    def category_code(self, category: Any) -> int:
        """Code of the category labelled ``category`` (ValueError naming the scale if absent)."""
        where = np.flatnonzero([c == category or str(c) == str(category) for c in self.categories])
        if where.size == 0:
            raise ValueError(f"category {category!r} is not on the rating scale {list(self.categories)}")
        return int(where[0])

    def counts(self) -> np.ndarray:
        """Number of ratings of each item in each category, int array of shape (n_items, K)."""
        K = self.n_categories
        flat = np.bincount(self.item * K + self.rating, minlength=self.n_items * K)
        return flat.reshape(self.n_items, K)

    def ratings_per_item(self) -> np.ndarray:
        """Number of ratings of each item, int array of shape (n_items,)."""
        return np.bincount(self.item, minlength=self.n_items)

    def with_ratings(self, rating: np.ndarray) -> Ratings:
        """The same design with other rating codes (a replicate), shape (R,)."""
        return replace(self, rating=rating)

    def frame(self) -> pd.DataFrame:
        """The long table: item, rater, rating (user labels; rating categorical), R rows."""
        item_col, rater_col, rating_col = self.columns
        return pd.DataFrame(
            {
                item_col: np.asarray(self.item_labels, dtype=object)[self.item],
                rater_col: self.rater_labels.to_numpy()[self.rater],
                rating_col: pd.Categorical.from_codes(self.rating, categories=self.categories),
            }
        )


@dataclass(frozen=True, eq=False)
class DrawParameters:
    """The parameters a discrepancy is evaluated at (one posterior draw).

    Attributes
    ----------
    pi : array, shape (K,)
        Prevalence of the classes.
    theta : array, shape (J, K, K)
        ``theta[j, k, l]``: probability that rater ``j`` rates an item of
        class ``k`` as ``l``.
    z : int array, shape (n_items,)
        True class code of each item of the data set the discrepancy is
        applied to: for the observed data, a draw from the posterior given
        the data; for a replicate, the classes it was simulated with.
    """

    pi: np.ndarray
    theta: np.ndarray
    z: np.ndarray


class Statistic:
    """A statistic ``T(y)`` of one data set, for :func:`pyrater.posterior_predictive_check`.

    Parameters
    ----------
    fn : callable
        ``fn(data)`` returning a number or a 1-d array (the same length for
        every data set), where ``data`` is a :class:`Ratings` (``data="ratings"``)
        or the long DataFrame (``data="frame"``).
    name : str, optional
        Default: the function's name.
    data : {"ratings", "frame"}
        Which form of the data ``fn`` takes.  ``"ratings"`` is fast (numpy
        arrays, no table per replicate).
    labels : sequence or callable, optional
        Labels of the components of a vector statistic, or a function of the
        observed :class:`Ratings` giving them.  Default: the index of a
        returned pandas Series, else ``0 .. dim - 1``.

    Examples
    --------
    >>> from pyrater.checking import Statistic
    >>> import numpy as np
    >>> share_ones = Statistic(lambda r: np.mean(r.rating == 0), name="share_of_first_category")
    """

    #: whether the function also takes the draw's parameters
    takes_parameters = False

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        *,
        data: DataForm = "ratings",
        labels: Sequence[Any] | Callable[[Ratings], Sequence[Any]] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"{type(self).__name__} needs a callable, got {type(fn).__name__}")
        if data not in ("ratings", "frame"):
            raise ValueError(f"data must be 'ratings' or 'frame', got {data!r}")
        self.fn = fn
        self.name = name if name else getattr(fn, "__name__", type(self).__name__.lower())
        self.data: DataForm = data
        self._labels = labels

    def labels(self, observed: Ratings) -> pd.Index | None:
        """Labels of the components (None: not declared)."""
        if self._labels is None:
            return None
        values = self._labels(observed) if callable(self._labels) else self._labels
        return values if isinstance(values, pd.Index) else pd.Index(list(values))

    def __call__(self, data: Any, params: DrawParameters | None = None) -> Any:
        """The statistic of ``data`` (``params`` is ignored)."""
        return self.fn(data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, data={self.data!r})"


class Discrepancy(Statistic):
    """A discrepancy ``T(y, params)`` of a data set and the parameters of a posterior draw.

    ``fn(data, params)`` takes the data (as :class:`Statistic`) and a
    :class:`DrawParameters` (``pi``, ``theta``, ``z``).  Its observed value
    is computed once per draw (the observed data at that draw's parameters
    and posterior classes); the p-values compare replicated and observed
    values draw by draw.

    Examples
    --------
    Share of ratings that agree with the item's true class:

    >>> from pyrater.checking import Discrepancy
    >>> from pyrater.checking.scoring import accuracy
    >>> import numpy as np
    >>> def accuracy(r, p):
    ...     return np.mean(r.rating == p.z[r.item])
    >>> check = Discrepancy(accuracy)
    """

    takes_parameters = True

    def __call__(self, data: Any, params: DrawParameters | None = None) -> Any:
        """The discrepancy of ``data`` at ``params``."""
        return self.fn(data, params)


def as_statistic(fn: Any, name: str | None = None) -> Statistic:
    """``fn`` as a :class:`Statistic`: a plain function takes the long DataFrame (as before)."""
    if isinstance(fn, Statistic):
        if name and name != fn.name:
            out = type(fn)(fn.fn, name, data=fn.data, labels=fn._labels)
            return out
        return fn
    if not callable(fn):
        raise TypeError(f"a statistic must be callable, got {type(fn).__name__}: {fn!r}")
    return Statistic(fn, name, data="frame")


# ------------------------------------------------------------------ ready-made statistics
def vote_histogram(category: Any, name: str | None = None) -> Statistic:
    """Histogram of the number of ratings in ``category`` per item (vote counts).

    Component ``v`` (``v = 0 .. m``, ``m`` the most ratings any item has) is
    the number of items with exactly ``v`` ratings in ``category``.  On the
    caries data (five dentists, category 2 = caries) it is the histogram of
    positive votes per item that Dawid--Skene fails to reproduce (Han,
    Adıgüzel and Carpenter 2024).

    Parameters
    ----------
    category : label
        A category of the rating scale (user label).
    name : str, optional
        Default ``"votes_<category>"``.

    Returns
    -------
    Statistic
        Of :class:`Ratings`; value: int array, shape (m + 1,).
    """

    def counts(data: Ratings) -> np.ndarray:
        code = data.category_code(category)
        votes = np.bincount(data.item[data.rating == code], minlength=data.n_items)
        return np.bincount(votes, minlength=int(data.ratings_per_item().max(initial=0)) + 1)

    return Statistic(
        counts,
        name if name else f"votes_{category}",
        labels=lambda data: pd.RangeIndex(int(data.ratings_per_item().max(initial=0)) + 1, name="votes"),
    )


def category_shares(name: str = "category_shares") -> Statistic:
    """Share of all ratings in each category.

    Returns
    -------
    Statistic
        Of :class:`Ratings`; value: float array, shape (K,), labelled by the categories.
    """

    def shares(data: Ratings) -> np.ndarray:
        return np.bincount(data.rating, minlength=data.n_categories) / max(data.n_ratings, 1)

    return Statistic(shares, name, labels=lambda data: pd.Index(data.categories, name="category"))


def pair_agreement(name: str = "pair_agreement") -> Statistic:
    """Share of pairs of ratings of the same item that agree (a scalar).

    Returns
    -------
    Statistic
        Of :class:`Ratings`; value: float.
    """

    def agree(data: Ratings) -> float:
        c = data.counts().astype(float)
        n = c.sum(axis=1)
        pairs = (n * (n - 1)).sum()
        return float((c * (c - 1)).sum() / pairs) if pairs > 0 else 0.0

    return Statistic(agree, name)
