"""The vote model: majority vote as a predictive model, the baseline of :func:`pyrater.compare`.

Majority vote has no likelihood, so it cannot enter an elpd table as it is.
Its probabilistic counterpart ignores who rated: each item ``i`` has its own
distribution ``phi_i`` over the K ratings, ``phi_i ~ Dirichlet(s m)``, and the
item's ratings are independent draws from it.  The class it estimates is the
most frequent rating, majority vote (the posterior mean of ``phi_i`` is the
vote shares shrunk towards ``m``).  An item's ratings then have the
Dirichlet-multinomial probability (of the ratings in the order given, the
same event the rating models score)::

    log p(y_i) = lgamma(S) - lgamma(S + n_i) + sum_l [lgamma(a_l + c_il) - lgamma(a_l)]

with ``a = s m``, ``S = sum(a)``, ``c_il`` the item's ratings of category
``l`` and ``n_i`` their number.  ``a`` (K numbers) is estimated by maximum
likelihood on the training items and the held-out items are scored by it:
:func:`vote_model_kfold` is its K-fold estimate of the expected log
predictive density of a new item's ratings, on the scale of
:func:`pyrater.kfold` and PSIS-LOO.  A rating model that does not beat it
has learned nothing from who gave each rating that helps predict the
ratings; one that beats it by a wide margin has.  (It does not say which is
the more *accurate*: a model may predict the ratings better by learning
raters' biases and still label fewer items right.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import digamma, gammaln

from .._validation import check_int, check_seed
from ..data.ratings import RatingData
from ..models.kernels import category_votes

__all__ = ["category_counts", "vote_log_lik", "fit_vote_model", "vote_model_kfold"]


def category_counts(data: RatingData) -> np.ndarray:
    """Ratings of each category per unit, whoever gave them: (I, K) float."""
    return category_votes(data.counts, data.n_categories)


def vote_log_lik(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Dirichlet-multinomial log probability of each row of ``c`` (units, K) under ``Dirichlet(a)``."""
    n = c.sum(axis=1)
    S = a.sum()
    return gammaln(S) - gammaln(S + n) + (gammaln(a + c) - gammaln(a)).sum(axis=1)


def fit_vote_model(c: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Maximum-likelihood ``a`` (K,) of the vote model from category counts ``c`` (units, K) with unit weights.

    Minimised over ``log a`` with the exact gradient (L-BFGS); units without
    ratings carry no information and are left out.
    """
    rated = (c.sum(axis=1) > 0) & (weight > 0)
    c, w = c[rated], weight[rated].astype(float)
    K = c.shape[1]
    if c.shape[0] == 0:
        return np.ones(K)
    n = c.sum(axis=1)
    share = (w @ c + 0.5) / (w @ n + 0.5 * K)

    def objective(eta: np.ndarray) -> tuple[float, np.ndarray]:
        a = np.exp(eta)
        S = a.sum()
        ll = w @ (gammaln(S) - gammaln(S + n) + (gammaln(a + c) - gammaln(a)).sum(axis=1))
        common = w @ (digamma(S) - digamma(S + n))
        grad_a = common + w @ (digamma(a + c) - digamma(a))
        return -float(ll), -grad_a * a

    start = np.log(share * 2.0 * K)  # concentration 2K, means at the rating shares
    res = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(-12.0, 12.0)] * K)
    return np.exp(res.x)


def vote_model_kfold(data: RatingData, k: int = 10, *, seed: int | None = None):
    """Expected log predictive density of the vote model by K-fold cross-validation over items.

    Parameters
    ----------
    data : RatingData
        The ratings (grouped data: each pattern's items are split like any others).
    k : int
        Folds (default 10), on the split of :func:`pyrater.kfold` with the same
        ``seed``, so the two compare item by item.
    seed : int, optional
        Seed of the split (default 0).

    Returns
    -------
    ELPD
        ``kind="loo"``, ``method="kfold"``; ``p`` is ``p_kfold`` (about K).
    """
    from .compare import ELPD
    from .kfold import fold_of_items

    k = check_int("k", k, 2)
    checked = check_seed(seed)
    seed = 0 if checked is None else checked
    weight = np.asarray(data.weight, dtype=np.int64)
    n_items = int(weight.sum())
    if n_items < k:
        raise ValueError(f"k={k} folds need at least {k} items; the data hold {n_items}")
    c = category_counts(data)
    unit_of_item = data.unit_of_item
    fold = fold_of_items(n_items, k, seed)
    elpd_i = np.empty(n_items)
    for f in range(k):
        out = np.flatnonzero(fold == f)
        held = np.bincount(unit_of_item[out], minlength=data.n_units)
        a = fit_vote_model(c, weight - held)
        elpd_i[out] = vote_log_lik(c[unit_of_item[out]], a)
    lpd = float(weight @ vote_log_lik(c, fit_vote_model(c, weight)))
    elpd = float(elpd_i.sum())
    index = data.item_index
    return ELPD(
        kind="loo",
        elpd=elpd,
        se=float(np.sqrt(n_items * np.var(elpd_i))),
        p=lpd - elpd,
        elpd_i=pd.Series(elpd_i, index=index, name="elpd_kfold_i"),
        pareto_k=None,
        n_bad_k=0,
        warning=False,
        n_samples=1,
        n_data_points=n_items,
        method="kfold",
        n_subsample=n_items,
    )
