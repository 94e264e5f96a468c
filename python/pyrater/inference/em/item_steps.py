"""The steps of EM for the item-difficulty family: per-cell log probabilities, E-step, block-Newton M-step.

Every (item, rater, rating) cell of the count matrix is one weighted
observation per class ``k``: it is "right" when the rating is ``k``, with
linear predictor ``eta = delta_i (a[j, k] - beta_i)``, where the rater
ability ``a[j, k]`` is ``logit_spec[j]`` (``k = 0``) or ``logit_sens[j]``
(``k = 1``) at K = 2 and ``logit_accuracy[j, k]`` at K >= 3::

    log P(right) = log(gamma_i + (1 - gamma_i) inv_logit(eta))
    log P(wrong) = log(1 - gamma_i) + log inv_logit(-eta) - log(K - 1)

(a wrong rating is spread evenly over the K - 1 other categories; at K = 2
the constant is 0, and it never enters a derivative).

The expected complete-data log posterior given class probabilities ``T`` is
``sum_i w_i T[i, k] log pi_k + sum_cells count * T[i, k] log P(y | z = k) +
log prior``.  Given pi it separates into one term per rater and one per item
(difficulty, discrimination, guessing).  A rater's term is a sum of
one-dimensional terms, one per class ability: at K = 2 its two logits
interact only through the non-adversarial constraint ``logit_sens +
logit_spec > 0``; at K >= 3 each ``a[j, k]`` is on its own (constraint
``a[j, k] > -log(K - 1)``).  The M-step (:func:`rater_step`,
:func:`item_step`) takes one safeguarded Newton step per rater ability and
per item with analytic gradients and Hessians (vectorised over raters /
items; the sums over cells are the numba passes of
:mod:`pyrater.inference.em.item_kernel`, or :func:`numpy.bincount` in the
numpy reference), halving the step of every unit whose own term would not
increase; :func:`shift_step` then moves every difficulty and rater ability by
the same amount, exactly to the prior's optimum along that direction (the
likelihood is flat along it).  No block update lowers the expected
complete-data log posterior, so EM with this M-step is a generalised EM,
monotone in the objective.

Parameter scales: the discrimination is updated on its log ``u = log delta``
and the guessing on its own scale in ``[0, 1)`` (a projected Newton step: a
guessing parameter at 0 with an outward gradient stays there, the mode on the
boundary the default Beta(1, 9) prior allows).  The log densities are those of
the parameters themselves (no Jacobian), as Stan's optimiser maximises them, so
the change of scale leaves the maximiser unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import betaln, expit, gammaln, log_expit, log_ndtr, logsumexp, xlog1py, xlogy

__all__ = [
    "Cells",
    "ItemState",
    "ItemPriors",
    "cells_of",
    "class_log_probs",
    "e_step",
    "log_prior",
    "item_log_prior",
    "rater_step",
    "item_step",
    "pi_step",
    "shift_step",
    "state_from_classes",
]

#: largest guessing parameter a step may reach (the log density of a wrong rating is -inf at 1)
GUESS_MAX = 1.0 - 1e-9
#: largest change of an item or rater parameter in one Newton step (a trust region against overflow)
MAX_STEP = 4.0
#: step halvings per block before a unit keeps its value
HALVINGS = 12
#: share of the distance to the non-adversarial boundary a rater step may cover
TO_BOUNDARY = 0.9
#: a unit whose Newton step is at most this in every parameter keeps its values (rounding noise)
NEGLIGIBLE = 1e-12


@dataclass(frozen=True)
class Cells:
    """The nonzero (item, rater, rating) cells of item-level counts.

    Attributes
    ----------
    item, rater : int arrays (nnz,)
    rating : int array (nnz,)
        The category code of the rating (0 .. K - 1).
    count : float array (nnz,)
        Number of such ratings.
    n_items, n_raters, n_categories : int
    kernel : module or None
        :mod:`pyrater.inference.em.item_kernel` when the passes over the cells
        run compiled (numba), None for numpy.
    """

    item: np.ndarray
    rater: np.ndarray
    rating: np.ndarray
    count: np.ndarray
    n_items: int
    n_raters: int
    n_categories: int = 2
    kernel: Any = None

    @property
    def log_others(self) -> float:
        """``log(K - 1)``: a wrong rating's share of the other categories (0 at K = 2)."""
        return float(np.log(self.n_categories - 1.0))


def cells_of(counts: sp.csr_matrix, kernel: Any = None, n_categories: int = 2) -> Cells:
    """The cells of a count matrix (I, K J), column ``j K + k`` (:attr:`pyrater.RatingData.counts`)."""
    K = int(n_categories)
    c = sp.csr_matrix(counts)
    c.sum_duplicates()
    item = np.repeat(np.arange(c.shape[0], dtype=np.int64), np.diff(c.indptr))
    return Cells(
        item=item,
        rater=(c.indices // K).astype(np.int64),
        rating=(c.indices % K).astype(np.int64),
        count=np.asarray(c.data, dtype=float),
        n_items=int(c.shape[0]),
        n_raters=int(c.shape[1] // K),
        n_categories=K,
        kernel=kernel,
    )


_NONE = np.empty(0)
_ALL = np.empty(0, dtype=np.int64)


def _or_empty(x: np.ndarray | None) -> np.ndarray:
    return _NONE if x is None else x


@dataclass
class ItemState:
    """Parameters of the item-difficulty model.

    Attributes
    ----------
    pi : array (K,)
        Prevalence of the classes.
    ability : array (K, J)
        The rater abilities each class reads, ``ability[k, j] = a[j, k]``
        (one contiguous row per class): at K = 2 row 0 is ``logit_spec``
        and row 1 ``logit_sens``; at K >= 3 it is ``logit_accuracy.T``.
    difficulty : array (I,)
    discrimination, guessing : arrays (I,) or None
        None for a variant without them (fixed at 1 and 0).
    """

    pi: np.ndarray
    ability: np.ndarray
    difficulty: np.ndarray
    discrimination: np.ndarray | None = None
    guessing: np.ndarray | None = None

    @property
    def n_categories(self) -> int:
        """K."""
        return int(self.ability.shape[0])

    @property
    def logit_spec(self) -> np.ndarray:
        """K = 2: the logit specificities (J,) (a view of ``ability[0]``)."""
        return self.ability[0]

    @property
    def logit_sens(self) -> np.ndarray:
        """K = 2: the logit sensitivities (J,) (a view of ``ability[1]``)."""
        return self.ability[1]

    def copy(self) -> ItemState:
        """A deep copy."""
        fields: dict[str, Any] = {k: (None if v is None else v.copy()) for k, v in self.__dict__.items()}
        return replace(self, **fields)

    def flat(self) -> np.ndarray:
        """Every parameter in one vector (the stopping rule's parameter change)."""
        parts = [self.pi, self.ability.ravel(), self.difficulty]
        parts += [p for p in (self.discrimination, self.guessing) if p is not None]
        return np.concatenate(parts)

    def named(self) -> dict[str, np.ndarray]:
        """The model's own parameters besides pi, named as in the Stan program.

        ``logit_sens``, ``logit_spec`` (J,) at K = 2; ``logit_accuracy`` (J, K)
        at K >= 3; ``difficulty`` and, when fitted, ``discrimination`` and
        ``guessing`` (I,).
        """
        out: dict[str, np.ndarray]
        if self.n_categories == 2:
            out = {"logit_sens": self.logit_sens, "logit_spec": self.logit_spec}
        else:
            out = {"logit_accuracy": self.ability.T}
        out["difficulty"] = self.difficulty
        if self.discrimination is not None:
            out["discrimination"] = self.discrimination
        if self.guessing is not None:
            out["guessing"] = self.guessing
        return {k: np.array(v, order="C") for k, v in out.items()}


@dataclass(frozen=True)
class ItemPriors:
    """The priors EM uses; a rater or pi entry of None means none (maximum likelihood).

    Attributes
    ----------
    alpha : array (K,) or None
        Dirichlet prior on pi.
    sens_prior, spec_prior : arrays (2,) or None
        K = 2: normal (location, scale) priors on the logit sensitivity / specificity.
    difficulty_scale, discrimination_scale : float
    guessing_prior : array (2,)
        Beta (a, b).
    non_adversarial : bool
        K = 2: ``logit_sens + logit_spec > 0``; K >= 3: every ability
        ``a[j, k] > -log(K - 1)`` (accuracy above chance).  Under MAP the
        rater prior is the normal prior truncated there (its normalising
        constant included).
    accuracy_prior : array (K, 2) or None
        K >= 3: normal (location, scale) prior of ``a[j, k]``, one row per class.
    n_categories : int
        K.
    """

    alpha: np.ndarray | None
    sens_prior: np.ndarray | None
    spec_prior: np.ndarray | None
    difficulty_scale: float
    discrimination_scale: float
    guessing_prior: np.ndarray
    non_adversarial: bool
    accuracy_prior: np.ndarray | None = None
    n_categories: int = 2
    rater_const: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        const = 0.0
        if self.n_categories == 2:
            if self.non_adversarial and self.sens_prior is not None and self.spec_prior is not None:
                m = self.sens_prior[0] + self.spec_prior[0]
                s = float(np.hypot(self.sens_prior[1], self.spec_prior[1]))
                const = -float(log_ndtr(m / s))  # per rater: minus log P(sens + spec > 0) under the prior
        elif self.non_adversarial and self.accuracy_prior is not None:
            loc, scale = self.accuracy_prior[:, 0], self.accuracy_prior[:, 1]
            # per rater: minus sum_k log P(a_k > lower) under the prior (Stan's normal_lccdf(lower | m_k, s_k))
            const = -float(log_ndtr((loc - self.lower) / scale).sum())
        object.__setattr__(self, "rater_const", const)

    @property
    def lower(self) -> float:
        """K >= 3 and non-adversarial: the abilities' lower bound ``-log(K - 1)`` (else ``-inf``)."""
        if self.n_categories > 2 and self.non_adversarial:
            return -float(np.log(self.n_categories - 1.0))
        return -np.inf

    def rater_prior(self, k: int) -> np.ndarray | None:
        """The (location, scale) prior of the abilities class ``k`` reads, or None (ML)."""
        if self.n_categories == 2:
            return self.sens_prior if k == 1 else self.spec_prior
        return None if self.accuracy_prior is None else self.accuracy_prior[k]


# ------------------------------------------------------------------ log probabilities
def _eta(cells: Cells, st: ItemState, k: int, idx: np.ndarray | None = None) -> np.ndarray:
    """The linear predictor of class ``k`` at every cell (or at the cells ``idx``)."""
    item = cells.item if idx is None else cells.item[idx]
    rater = cells.rater if idx is None else cells.rater[idx]
    eta = st.ability[k][rater] - st.difficulty[item]
    if st.discrimination is not None:
        eta *= st.discrimination[item]
    return eta


def class_log_probs(cells: Cells, st: ItemState, k: int, idx: np.ndarray | None = None) -> np.ndarray:
    """``log P(y | z = k)`` of every cell (nnz,) (or of the cells ``idx``), in log space throughout."""
    if cells.kernel is not None:
        out = np.empty(cells.item.size if idx is None else idx.size)
        cells.kernel.log_probs(
            cells.item,
            cells.rater,
            cells.rating,
            st.ability[k],
            st.difficulty,
            _or_empty(st.discrimination),
            _or_empty(st.guessing),
            k,
            cells.log_others,
            _ALL if idx is None else idx,
            out,
        )
        return out
    eta = _eta(cells, st, k, idx)
    right = (cells.rating if idx is None else cells.rating[idx]) == k
    if st.guessing is None:
        np.negative(eta, out=eta, where=~right)
        out = log_expit(eta)
        if cells.n_categories > 2:
            out[~right] -= cells.log_others
        return out
    item = cells.item if idx is None else cells.item[idx]
    miss = np.log1p(-st.guessing[item]) + log_expit(-eta)  # log (1 - P(right))
    with np.errstate(divide="ignore"):
        if cells.n_categories > 2:
            return np.where(right, np.log(-np.expm1(miss)), miss - cells.log_others)
        return np.where(right, np.log(-np.expm1(miss)), miss)


def e_step(
    cells: Cells, log_probs: list[np.ndarray], pi: np.ndarray, known: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities (I, K) and per-item log-likelihood (I,) from the cells' log probabilities.

    ``log_probs[k]`` is :func:`class_log_probs` of class ``k``; an item of
    known class gets one-hot probabilities and ``log p(y_i, z_i)``.
    """
    I, K = cells.n_items, cells.n_categories
    lj = np.empty((I, K))
    with np.errstate(divide="ignore"):
        for k in range(K):
            lj[:, k] = np.log(pi[k]) + np.bincount(cells.item, weights=cells.count * log_probs[k], minlength=I)
    if known is not None:
        rows = np.flatnonzero(known >= 0)
        other = np.arange(K)[None, :] != known[rows, None]
        lj[rows] = np.where(other, -np.inf, lj[rows])
    ll = np.logaddexp(lj[:, 0], lj[:, 1]) if K == 2 else logsumexp(lj, axis=1)
    with np.errstate(invalid="ignore"):
        T = np.exp(lj - ll[:, None])
    return T, ll


# ------------------------------------------------------------------ priors
def _normal_logpdf(x: np.ndarray, loc: float, scale: float) -> np.ndarray:
    return -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)


def item_log_prior(st: ItemState, pr: ItemPriors) -> np.ndarray:
    """Log prior density of each item's parameters (I,), every constant included."""
    s = pr.difficulty_scale
    out = _normal_logpdf(st.difficulty, 0.0, s)
    if st.discrimination is not None:
        tau = pr.discrimination_scale
        with np.errstate(divide="ignore"):
            u = np.log(st.discrimination)
        out = out - u - np.log(tau * np.sqrt(2 * np.pi)) - 0.5 * (u / tau) ** 2
    if st.guessing is not None:
        a, b = pr.guessing_prior
        out = out + xlogy(a - 1.0, st.guessing) + xlog1py(b - 1.0, -st.guessing) - betaln(a, b)
    return out


def _rater_log_prior(x: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
    if prior is None:
        return np.zeros_like(x)
    return _normal_logpdf(x, prior[0], prior[1])


def log_prior(st: ItemState, pr: ItemPriors) -> float:
    """The log prior density of every parameter (the parts ``pr`` holds), as Stan's model block writes it."""
    total = float(item_log_prior(st, pr).sum())
    for k in range(st.n_categories):
        total += float(_rater_log_prior(st.ability[k], pr.rater_prior(k)).sum())
    if pr.rater_prior(0) is not None:
        total += st.ability.shape[1] * pr.rater_const
    if pr.alpha is not None:
        a = pr.alpha
        with np.errstate(divide="ignore"):
            total += float(gammaln(a.sum()) - gammaln(a).sum() + xlogy(a - 1.0, st.pi).sum())
    return total


# ------------------------------------------------------------------ M-step: pi
def pi_step(T: np.ndarray, weight: np.ndarray, alpha: np.ndarray | None) -> np.ndarray:
    """The prevalence maximising the expected log posterior: ``pi_k ∝ n_k (+ alpha_k - 1)``."""
    n = weight @ T
    if alpha is not None:
        n = n + alpha - 1.0
    return n / n.sum()


# ------------------------------------------------------------------ derivatives in eta (and gamma)
def _derivs(eta: np.ndarray, right: np.ndarray, gamma: np.ndarray | None) -> dict[str, np.ndarray]:
    """First and second derivatives of a cell's log probability in ``eta`` (and in ``gamma``).

    With guessing, ``P = gamma + (1 - gamma) s`` (``s = inv_logit(eta)``) has
    no cancellation, so the derivatives need no logarithms: for a right
    rating ``d/d eta = q (1 - s)`` with ``q = (1 - gamma) s / P``,
    ``d/d gamma = (1 - s) / P``; for a wrong one ``-s`` and ``-1 / (1 - gamma)``.
    """
    s = expit(eta)
    one_m_s = 1.0 - s
    if gamma is None:
        return {"e": np.where(right, one_m_s, -s), "ee": -s * one_m_s}
    inv_p = 1.0 / np.maximum(gamma + (1.0 - gamma) * s, 1e-300)
    q = (1.0 - gamma) * s * inv_p
    qm = q * one_m_s
    d = {
        "e": np.where(right, qm, -s),
        "ee": np.where(right, qm * ((1.0 - 2.0 * s) - qm), -s * one_m_s),
        "g": np.where(right, one_m_s * inv_p, -1.0 / (1.0 - gamma)),
        "eg": np.where(right, -s * one_m_s * inv_p * inv_p, 0.0),
    }
    d["gg"] = -(d["g"] ** 2)
    return d


# ------------------------------------------------------------------ M-step: raters
def rater_step(
    cells: Cells,
    st: ItemState,
    omega: np.ndarray,
    log_probs: list[np.ndarray],
    pr: ItemPriors,
) -> None:
    """One safeguarded Newton step on every rater ability (``st`` and ``log_probs`` updated in place).

    ``omega[k]`` (nnz,) is the weight of each cell for class ``k`` (count x
    unit weight x ``T[i, k]``); ``omega`` is (K, nnz).  Each rater's term of
    the expected log posterior is a sum of one-dimensional terms, one per
    ability ``a[j, k]`` (the cells weighted for class ``k``).  With
    ``non_adversarial`` a step keeps the constraint, covering at most
    :data:`TO_BOUNDARY` of the way to its boundary: at K = 2 a rater's two
    steps together keep ``logit_sens + logit_spec > 0``; at K >= 3 each keeps
    ``a[j, k] > -log(K - 1)``.  An ability whose term would fall halves its
    step, up to :data:`HALVINGS` times, else keeps its value.
    """
    J, K = cells.n_raters, cells.n_categories
    delta = gamma = None
    if cells.kernel is None:
        delta = None if st.discrimination is None else st.discrimination[cells.item]
        gamma = None if st.guessing is None else st.guessing[cells.item]
    step = np.zeros((K, J))
    old_q = np.zeros((K, J))
    for k in range(K):
        G: np.ndarray
        H: np.ndarray
        F: np.ndarray
        if cells.kernel is not None:
            G, H, F = np.zeros(J), np.zeros(J), np.zeros(J)
            cells.kernel.rater_sums(
                cells.item,
                cells.rater,
                cells.rating,
                omega[k],
                st.ability[k],
                st.difficulty,
                _or_empty(st.discrimination),
                _or_empty(st.guessing),
                k,
                G,
                H,
                F,
            )
        else:
            d = _derivs(_eta(cells, st, k), cells.rating == k, gamma)
            de = d["e"] if delta is None else d["e"] * delta
            dee = d["ee"] if delta is None else d["ee"] * delta**2
            G = np.bincount(cells.rater, weights=omega[k] * de, minlength=J)
            H = np.bincount(cells.rater, weights=omega[k] * dee, minlength=J)
            # a bound on the curvature (the no-guessing model's: inv_logit' <= 1/4) where H is not negative
            dd = 0.25 if delta is None else 0.25 * delta**2
            F = np.bincount(cells.rater, weights=omega[k] * dd, minlength=J)
        prior = pr.rater_prior(k)
        x = st.ability[k]
        if prior is not None:
            G = G - (x - prior[0]) / prior[1] ** 2
            H = H - 1.0 / prior[1] ** 2
            F = F + 1.0 / prior[1] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(H < 0, -G / H, G / F)
        step[k] = np.clip(np.nan_to_num(s, nan=0.0, posinf=0.0, neginf=0.0), -MAX_STEP, MAX_STEP)
        old_q[k] = np.bincount(cells.rater, weights=omega[k] * log_probs[k], minlength=J)
        old_q[k] += _rater_log_prior(x, prior)
    t: np.ndarray = np.ones(J)
    if pr.non_adversarial:
        if K == 2:
            margin = st.logit_sens + st.logit_spec
            down = step[0] + step[1]
        else:
            margin, down = st.ability - pr.lower, step
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(down < 0, np.minimum(1.0, TO_BOUNDARY * margin / -down), 1.0)
    x0 = st.ability.copy()
    todo: np.ndarray = np.abs(step) > NEGLIGIBLE
    idx: np.ndarray | None = None  # the cells of the raters still to move (None: all)
    for _ in range(HALVINGS + 1):
        if not todo.any():
            break
        cand = np.where(todo, x0 + t * step, x0)
        trial = replace(st, ability=cand)
        rater = cells.rater if idx is None else cells.rater[idx]
        moving = [bool(todo[k].any()) for k in range(K)]
        lp = [class_log_probs(cells, trial, k, idx) if moving[k] else _NONE for k in range(K)]
        ok = np.zeros((K, J), dtype=bool)
        for k in (k for k in range(K) if moving[k]):
            om = omega[k] if idx is None else omega[k][idx]
            new_q = np.bincount(rater, weights=om * lp[k], minlength=J)
            new_q += _rater_log_prior(cand[k], pr.rater_prior(k))
            ok[k] = todo[k] & (new_q >= old_q[k])
        if pr.non_adversarial:
            if K == 2:  # a rater keeps only moves that stay non-adversarial (one logit alone may not)
                spec = np.where(ok[0], cand[0], st.logit_spec)
                sens = np.where(ok[1], cand[1], st.logit_sens)
                ok[:, spec + sens <= 0] = False
            else:
                ok &= cand > pr.lower
        for k in range(K):
            if ok[k].any():
                st.ability[k, ok[k]] = cand[k, ok[k]]
                _merge(log_probs[k], lp[k], ok[k][rater], idx)
        todo &= ~ok
        t = t / 2.0
        idx = np.flatnonzero(np.any(todo, axis=0)[cells.rater])


def _merge(target: np.ndarray, values: np.ndarray, sel: np.ndarray, idx: np.ndarray | None) -> None:
    """``target[cells] = values`` at the selected cells (``values`` computed at the cells ``idx``, None: all)."""
    if idx is None:
        np.copyto(target, values, where=sel)
    else:
        target[idx[sel]] = values[sel]


# ------------------------------------------------------------------ M-step: items
def _positive_definite(A: np.ndarray) -> np.ndarray:
    """Sylvester's criterion for a stack of small symmetric matrices (n, p, p)."""
    ok = A[:, 0, 0] > 0
    for m in range(2, A.shape[1] + 1):
        ok &= np.linalg.det(A[:, :m, :m]) > 0
    return ok


def _item_sums_numpy(
    cells: Cells,
    st: ItemState,
    omega: np.ndarray,
    col: dict[str, int],
    G: np.ndarray,
    H: np.ndarray,
) -> None:
    """:func:`pyrater.inference.em.item_kernel.item_sums` in numpy (both triangles of ``H``)."""
    I = cells.n_items
    delta = None if st.discrimination is None else st.discrimination[cells.item]
    gamma = None if st.guessing is None else st.guessing[cells.item]
    # per-cell sums over the K classes of omega x derivative, for each gradient / Hessian entry
    acc: dict[tuple[int, ...], np.ndarray] = {}

    def add(key: tuple[int, ...], value: np.ndarray) -> None:
        acc[key] = acc[key] + value if key in acc else value

    for k in range(cells.n_categories):
        eta = _eta(cells, st, k)
        d = _derivs(eta, cells.rating == k, gamma)
        w = omega[k]
        dl, dll = w * d["e"], w * d["ee"]
        m_delta = -1.0 if delta is None else -delta  # d eta / d beta
        add((col["beta"],), dl * m_delta)
        add((col["beta"], col["beta"]), dll * m_delta**2)
        if "u" in col:  # d eta / du = eta, d2 eta / du2 = eta, d2 eta / (d beta du) = -delta
            add((col["u"],), dl * eta)
            add((col["u"], col["u"]), dll * eta**2 + dl * eta)
            add((col["beta"], col["u"]), dll * m_delta * eta + dl * m_delta)
        if "g" in col:
            add((col["g"],), w * d["g"])
            add((col["g"], col["g"]), w * d["gg"])
            add((col["beta"], col["g"]), w * d["eg"] * m_delta)
            if "u" in col:
                add((col["u"], col["g"]), w * d["eg"] * eta)
    for key, value in acc.items():
        total = np.bincount(cells.item, weights=value, minlength=I)
        if len(key) == 1:
            G[:, key[0]] = total
        else:
            H[:, key[0], key[1]] = total
            H[:, key[1], key[0]] = total


def _item_gradient(
    cells: Cells, st: ItemState, omega: np.ndarray, pr: ItemPriors
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Gradient (I, p) and Hessian (I, p, p) of every item's term in (difficulty, log discrimination, guessing)."""
    I = cells.n_items
    names = ["beta"] + (["u"] if st.discrimination is not None else []) + (["g"] if st.guessing is not None else [])
    p = len(names)
    col = {n: c for c, n in enumerate(names)}
    G = np.zeros((I, p))
    H = np.zeros((I, p, p))
    if cells.kernel is not None:
        cells.kernel.item_sums(
            cells.item,
            cells.rater,
            cells.rating,
            omega,
            st.ability,
            st.difficulty,
            _or_empty(st.discrimination),
            _or_empty(st.guessing),
            G,
            H,
        )
        for a in range(p):
            for b in range(a):
                H[:, a, b] = H[:, b, a]
    else:
        _item_sums_numpy(cells, st, omega, col, G, H)
    # the priors of the parameters themselves (no Jacobian)
    s2 = pr.difficulty_scale**2
    G[:, 0] -= st.difficulty / s2
    H[:, 0, 0] -= 1.0 / s2
    if "u" in col:
        c, tau2 = col["u"], pr.discrimination_scale**2
        u = np.log(st.discrimination)  # type: ignore[arg-type]
        G[:, c] += -1.0 - u / tau2
        H[:, c, c] -= 1.0 / tau2
    if "g" in col:
        c = col["g"]
        a, b = pr.guessing_prior
        g = st.guessing
        assert g is not None
        with np.errstate(divide="ignore", invalid="ignore"):
            if a != 1.0:
                G[:, c] += (a - 1.0) / g
                H[:, c, c] -= (a - 1.0) / g**2
            if b != 1.0:
                G[:, c] -= (b - 1.0) / (1.0 - g)
                H[:, c, c] -= (b - 1.0) / (1.0 - g) ** 2
    return G, H, names


def _newton_steps_numpy(H: np.ndarray, G: np.ndarray) -> np.ndarray:
    """:func:`pyrater.inference.em.item_kernel.newton_steps` in numpy (batched solves)."""
    p = G.shape[1]
    A = -H
    finite = np.all(np.isfinite(A), axis=(1, 2)) & np.all(np.isfinite(G), axis=1)
    A[~finite] = np.eye(p)
    G = np.where(finite[:, None], G, 0.0)
    bad = ~_positive_definite(A)
    if bad.any():
        Ab = A[bad]
        diag = np.einsum("nii->ni", Ab)
        lam = np.max(np.abs(Ab).sum(axis=2) - np.abs(diag) - diag, axis=1)
        lam = np.maximum(lam, 0.0) + 1e-6 * (1.0 + np.abs(Ab).max(axis=(1, 2)))
        A[bad] = Ab + lam[:, None, None] * np.eye(p)
    return np.linalg.solve(A, G[:, :, None])[:, :, 0]


def item_step(
    cells: Cells,
    st: ItemState,
    omega: np.ndarray,
    log_probs: list[np.ndarray],
    pr: ItemPriors,
) -> None:
    """One safeguarded (projected) Newton step on every item's parameters (``st``, ``log_probs`` in place).

    The Newton direction solves ``-H d = G`` where ``-H`` is positive
    definite, else ``(-H + lambda I) d = G`` with ``lambda`` making it
    diagonally dominant (an ascent direction); a guessing parameter at 0 whose
    gradient points below 0 stays fixed, and a step's guessing is projected to
    ``[0, 1)``.  An item whose term would fall halves its step, up to
    :data:`HALVINGS` times, else keeps its values.
    """
    I = cells.n_items
    G, H, names = _item_gradient(cells, st, omega, pr)
    if "g" in names:
        c = names.index("g")
        assert st.guessing is not None
        fixed = (st.guessing <= 0.0) & (G[:, c] <= 0.0)
        G[fixed, c] = 0.0
        H[fixed, c, :] = 0.0
        H[fixed, :, c] = 0.0
        H[fixed, c, c] = -1.0
    if cells.kernel is not None:
        step = np.empty_like(G)
        cells.kernel.newton_steps(H, G, step)
    else:
        step = _newton_steps_numpy(H, G)
    big = np.abs(step).max(axis=1)
    step *= np.minimum(1.0, MAX_STEP / np.maximum(big, 1e-300))[:, None]
    K = cells.n_categories
    old_q = np.bincount(cells.item, weights=_weighted(omega, log_probs), minlength=I) + item_log_prior(st, pr)
    x0 = {"beta": st.difficulty.copy()}
    if "u" in names:
        x0["u"] = np.log(st.discrimination)  # type: ignore[arg-type]
    if "g" in names:
        x0["g"] = st.guessing.copy()  # type: ignore[union-attr]
    t = np.ones(I)
    todo = np.any(np.abs(step) > NEGLIGIBLE, axis=1)
    idx: np.ndarray | None = None  # the cells of the items still to move (None: all)
    for _ in range(HALVINGS + 1):
        if not todo.any():
            break
        ts = np.where(todo, t, 0.0)[:, None] * step
        trial = replace(st, difficulty=x0["beta"] + ts[:, 0])
        if "u" in names:
            trial.discrimination = np.exp(x0["u"] + ts[:, names.index("u")])
        if "g" in names:
            trial.guessing = np.clip(x0["g"] + ts[:, names.index("g")], 0.0, GUESS_MAX)
        item = cells.item if idx is None else cells.item[idx]
        lp = [class_log_probs(cells, trial, k, idx) for k in range(K)]
        om = omega if idx is None else omega[:, idx]
        new_q = np.bincount(item, weights=_weighted(om, lp), minlength=I)
        new_q += item_log_prior(trial, pr)
        ok = todo & (new_q >= old_q)
        if ok.any():
            st.difficulty[ok] = trial.difficulty[ok]
            if trial.discrimination is not None:
                st.discrimination[ok] = trial.discrimination[ok]  # type: ignore[index]
            if trial.guessing is not None:
                st.guessing[ok] = trial.guessing[ok]  # type: ignore[index]
            sel = ok[item]
            for k in range(K):
                _merge(log_probs[k], lp[k], sel, idx)
        todo &= ~ok
        t = t / 2.0
        idx = np.flatnonzero(todo[cells.item])


def _weighted(omega: np.ndarray, log_probs: list[np.ndarray]) -> np.ndarray:
    """``sum_k omega[k] * log_probs[k]`` per cell (summed in class order)."""
    out = omega[0] * log_probs[0]
    for k in range(1, len(log_probs)):
        out += omega[k] * log_probs[k]
    return out


def shift_step(st: ItemState, pr: ItemPriors) -> None:
    """Move every difficulty and rater logit by the same ``c`` that maximises the log prior (``st`` in place).

    ``eta = delta (logit - difficulty)`` is unchanged by a common shift, so is
    the likelihood: along this direction only the normal priors of the
    difficulties and (MAP) the rater logits change, a sum of quadratics whose
    maximiser is closed-form.  Alternating rater and item blocks crawls along
    this ridge (each block's step is held back by the other's fixed
    parameters); one exact step per M-step removes it.  With
    ``non_adversarial`` a shift down stops short of the boundary.
    """
    prec = st.difficulty.size / pr.difficulty_scale**2
    pull = -st.difficulty.sum() / pr.difficulty_scale**2
    for k in range(st.n_categories):
        prior = pr.rater_prior(k)
        if prior is not None:
            x = st.ability[k]
            prec += x.size / prior[1] ** 2
            pull += (prior[0] - x).sum() / prior[1] ** 2
    c = pull / prec
    if pr.non_adversarial and c < 0 and st.ability.size:
        if st.n_categories == 2:
            c = max(c, -TO_BOUNDARY * float(np.min(st.logit_sens + st.logit_spec)) / 2.0)
        else:
            c = max(c, -TO_BOUNDARY * float(np.min(st.ability - pr.lower)))
    if abs(c) > NEGLIGIBLE:
        st.difficulty += c
        st.ability += c


def state_from_classes(
    cells: Cells,
    T: np.ndarray,
    weight: np.ndarray,
    model: Any,
    pr: ItemPriors,
    margin: float = 0.5,
    project: bool = True,
) -> ItemState:
    """Starting parameters from class probabilities ``T`` (I, K).

    Each rater ability ``a[j, k]`` is the smoothed logit of the rater's
    agreement with ``T`` on class ``k`` (``(right + 0.5) / (n + 1)``).  When
    the model is non-adversarial (and ``project``) the abilities are moved
    onto the constraint with a margin: ``logit_sens + logit_spec >= margin``
    at K = 2, ``a[j, k] >= -log(K - 1) + margin / 2`` at K >= 3.  The items
    start at difficulty 0, discrimination 1 and guessing 0.05.
    """
    J, I, K = cells.n_raters, cells.n_items, cells.n_categories
    wT = T * weight[:, None]
    ability = np.empty((K, J))
    for k in range(K):
        omega = cells.count * wT[cells.item, k]
        right = cells.rating == k
        n = np.bincount(cells.rater, weights=omega, minlength=J)
        r = np.bincount(cells.rater, weights=omega * right, minlength=J)
        p = (r + 0.5) / (n + 1.0)
        ability[k] = np.log(p) - np.log1p(-p)
    if pr.non_adversarial and project:
        if K == 2:
            short = np.maximum(0.0, margin - (ability[0] + ability[1])) / 2.0
            ability += short
        else:
            ability = np.maximum(ability, pr.lower + margin / 2.0)
    return ItemState(
        pi=pi_step(T, weight, pr.alpha),
        ability=ability,
        difficulty=np.zeros(I),
        discrimination=np.ones(I) if model.discrimination else None,
        guessing=np.full(I, 0.05) if model.guessing else None,
    )
