"""Calibrating class probabilities with a few gold items: temperature scaling.

Dawid-Skene-family fits treat raters as independent given the class and
(for EM and optimisation) plug in point estimates, so their class
probabilities are over-confident on real data.  Given a few items whose true
class is known, :func:`calibrate` learns a map

    q[i, k] = softmax_k( log p[i, k] / T + b_k ),    b_0 = 0,

from the fit's class probabilities ``p`` to calibrated ones ``q``:
a temperature ``T > 0`` on the log probabilities (``T > 1`` softens, and for
K = 2 divides the log posterior odds by ``T``) and, with
``method="temperature+bias"``, one bias per category after the first (Guo
et al. 2017; the bias version is "vector scaling" with one shared
temperature).  The map keeps the order of the classes within an item when
there is no bias, so the most probable class (and the accuracy) is
unchanged by temperature scaling.

Three methods:

``"bayes-temperature"`` (default)
    Posterior-predictive temperature scaling: ``q`` is the average of the
    maps over the posterior of ``T`` given the gold items,
    ``q = sum_j w_j softmax(log p / T_j)`` on a grid of ``log T``
    (``LOG_T_GRID``, 121 points on ``[log 0.01, log 100]``), with a
    prior *uniform in the mean calibrated confidence*
    ``m(T) = mean_i max_k q[i, k]`` of all items of the fit
    (:func:`confidence_prior`; it uses the fit's probabilities, not the gold
    labels).  Why this prior: (i) the scale of a fit's log probabilities is
    arbitrary (it grows with the number of ratings per item and with the
    floor), so a prior on ``log T`` centred at ``T = 1`` is not neutral: on
    the real data sets of ``bench/`` the temperatures fitted on all gold
    items are 2-10 for the Dawid-Skene fits, and a prior at ``T = 1``
    pulls a map fitted on 10-40 items back towards the over-confident fit;
    a prior uniform on the confidence the map will report is invariant to
    that scale; (ii) when every gold item is classified correctly it gives
    the behaviour of Laplace's rule of succession (a confidence near
    ``(n + 1) / (n + 2)``, not 1) instead of ``T -> 0``; (iii) averaging
    over ``T`` carries the uncertainty of a map fitted on few items into
    the probabilities, where a plug-in ``T`` is itself over-confident (the
    failure being corrected).  A mixture of order-preserving maps preserves
    the order, so the most probable class is unchanged.  The floor (below)
    is the candidate with the largest marginal likelihood.  Nothing is
    tuned per data set: the grid, the prior and the floor candidates are
    fixed.
``"temperature"``
    One penalised maximum-likelihood temperature (the earlier default; see
    Estimation).
``"temperature+bias"``
    Penalised ML temperature and biases.

Measured effect (``bench/RESULTS_calibration.md``, the full run of
``bench/realdata_calibration.py``: the 18 real data sets, calibration on 5%
of the gold items, at least 10, 8 random splits, ECE on the other gold
items; the same fits and splits for both maps): mean held-out ECE after
calibration 0.048 for MAP EM (``"temperature"``: 0.051), 0.054 for ML EM
(0.053), 0.055 for the Gibbs fit (0.055), 0.052 for Stan's optimiser
(16 sets), at unchanged accuracy; with 10% of the gold items 0.044, 0.046,
0.046 and 0.045.  The mean held-out log-loss gains more: 0.50 against
0.62 for MAP EM, 0.47 against 0.54 for Gibbs.  Per set the two maps trade
places (``"bayes-temperature"`` has the lower ECE on 6-11 of the 18 sets
depending on the fit); its gain is on the small sets (10-40 calibration
items), where a single fitted temperature is noisy.  The 0.05 target with
5% gold items is met for MAP EM but not for ML EM or the Gibbs fit.  How
much better a map learnt from so few items could do is measured by
``bench/calibration_floor.py`` (``bench/RESULTS_calibration_floor.md``):
with gold labels simulated so that one temperature map is exactly right,
this map learnt from the same 5% of the items still scores a mean held-out
ECE of 0.045-0.052 (0.022-0.028 of it is the noise of ECE on the held-out
items, 0.020-0.030 the cost of learning the map from 10-40 items on the
small sets); the real labels add 0.002-0.007 for the Dawid-Skene and
class-conditional fits and 0.015-0.021 for the homogeneous model and
majority vote, whose probabilities one temperature cannot reshape.

Floor
-----
``log p`` needs a floor: maximum-likelihood EM gives probabilities of
exactly 0 and 1, and majority-vote shares are 0 for categories nobody
chose.  ``p`` is floored at ``c`` before the logarithm.  How confident such
"certain" items are relative to the others then depends on ``c`` (with
``c = 1e-15`` a unanimous item has log odds 34.5, and one temperature cannot
soften it without flattening every other item), so by default ``c`` is
fitted with ``T`` on the grid ``1e-15, 1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 1e-2,
10^-1.5, 0.1`` (values up to ``0.5 / K``; the smallest of tied values is
kept).  Pass ``floor=1e-15`` for plain temperature scaling.  On 8 of the
real data sets of ``bench/`` (calibration on 5% of the gold items, 6 random
splits, ECE on the other gold items) the fitted floor lowered the mean ECE
after calibration of majority-vote shares from 0.136 to 0.081 and of ML EM
from 0.068 to 0.062, and left MAP EM as it was (0.063).  With very few gold
items (10-20) the choice of floor is itself noisy.

Estimation
----------
``log T`` and the biases maximise the log-likelihood of the gold labels plus
a weak normal prior ``N(0, prior_sd^2)`` on ``log T`` and on each bias
(``prior_sd=None``: plain maximum likelihood).  The prior matters only with
few gold items: when every gold item is classified correctly the likelihood
keeps increasing as ``T -> 0`` (no finite maximum), and plain ML would then
make the probabilities *more* confident; the prior keeps ``T`` finite.
``log T`` is also bounded to ``[log 0.01, log 100]``.  The floor is the grid
value with the highest penalised likelihood of the temperature-only map;
with ``method="temperature+bias"`` the temperature and biases are then
fitted at that floor.

Cross-validation
----------------
The gold items are split into ``cv`` folds, stratified by gold class (items
of each class shuffled with ``numpy.random.default_rng(seed)`` and dealt
round-robin, so every fold holds about the same share of each class).  For
each fold the map is fitted on the other folds and applied to the fold; the
pooled out-of-fold probabilities are scored with
:func:`pyrater.checking.scoring.score_arrays` (accuracy, macro-F1, ECE with 15 bins,
Brier score, log-loss) beside the uncalibrated probabilities of the same
items.  The map returned for use is then fitted on all gold items.

References
----------
C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger (2017). On calibration of modern
neural networks. *ICML*.

Examples
--------
>>> import pandas as pd
>>> import pyrater
>>> sim = pyrater.simulate("dawid_skene", n_items=300, n_raters=4, n_categories=3, seed=2)
>>> fit = pyrater.em(sim.data)
>>> gold = pd.Series(sim.data.categories[sim.z[:60]], index=sim.data.unit_labels[:60])
>>> cal = pyrater.calibrate(fit, gold, seed=1)
>>> cal.probabilities.shape
(300, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, logsumexp

from .._validation import check_int, labels_repr
from .scoring import LOG_LOSS_EPS, METRICS, _probs, as_probabilities, ece_noise_floor, score_arrays

__all__ = [
    "calibrate",
    "check_gold",
    "check_gold_not_known",
    "CalibrationResult",
    "CALIBRATION_METHODS",
    "fit_temperature",
    "fit_calibration_map",
    "FLOORS",
    "apply_temperature",
    "stratified_folds",
    "min_gold_items",
    "LOG_T_GRID",
    "confidence_prior",
    "fit_bayes_temperature",
    "apply_bayes_temperature",
]

CALIBRATION_METHODS = ("bayes-temperature", "temperature", "temperature+bias")
#: Candidate floors of the probabilities (see the module notes).
FLOORS = (1e-15, 1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 1e-2, 10**-1.5, 0.1)
CalibrationMethod = Literal["bayes-temperature", "temperature", "temperature+bias"]
#: Bounds of log T.
LOG_T_BOUNDS = (np.log(0.01), np.log(100.0))
#: Grid of log T for ``method="bayes-temperature"`` (121 points on the bounds, steps of 0.077).
LOG_T_GRID = np.linspace(*LOG_T_BOUNDS, 121)
#: Items used for the prior of ``"bayes-temperature"`` (evenly spaced in the fit's item order beyond this).
PRIOR_MAX_ITEMS = 2000
#: Default sd of the normal prior on log T and the biases.
PRIOR_SD = 1.5


# ------------------------------------------------------------------ numpy core
def _log_probs(p: np.ndarray, floor: float = LOG_LOSS_EPS) -> np.ndarray:
    return np.log(np.maximum(p, floor))


def _penalised_nll(log_p: np.ndarray, y: np.ndarray, t: float, b: np.ndarray, prior_sd: float | None) -> float:
    lq = log_softmax(log_p / t + b[None, :], axis=1)
    pen = 0.0 if prior_sd is None else 0.5 * (np.log(t) ** 2 + float(b[1:] @ b[1:])) / prior_sd**2
    return float(-lq[np.arange(y.size), y].sum() + pen)


def _candidate_floors(floor: float | str, K: int) -> list[float]:
    """The floors a map chooses from: :data:`FLOORS` up to ``0.5 / K`` for ``"fit"``, else the given one."""
    if isinstance(floor, str) and floor == "fit":
        return [c for c in FLOORS if c <= 0.5 / K] or [FLOORS[0]]
    return [float(floor)]


def fit_calibration_map(
    p: np.ndarray,
    y: np.ndarray,
    bias: bool = False,
    prior_sd: float | None = PRIOR_SD,
    floor: float | str = "fit",
) -> tuple[float, float, np.ndarray]:
    """Floor, temperature and biases of the calibration map on labelled items.

    Parameters
    ----------
    p : array (n, K)
        Class probabilities of the labelled items.
    y : int array (n,)
    bias, prior_sd
        As :func:`fit_temperature`.
    floor : float or "fit"
        Fixed floor, or the best of :data:`FLOORS` (values <= 0.5 / K).

    Returns
    -------
    floor : float
    temperature : float
    b : array (K,)
    """
    best = None
    for c in _candidate_floors(floor, p.shape[1]):  # the floor is chosen with the temperature alone
        log_p = _log_probs(p, c)
        t, b = fit_temperature(log_p, y, bias=False, prior_sd=prior_sd)
        nll = _penalised_nll(log_p, y, t, b, prior_sd)
        if best is None or nll < best[0] - 1e-9 * max(1.0, abs(best[0])):
            best = (nll, c, t, b)
    assert best is not None  # _candidate_floors gives at least one floor
    _, c, t, b = best
    if bias:
        t, b = fit_temperature(_log_probs(p, c), y, bias=True, prior_sd=prior_sd)
    return c, t, b


def apply_temperature(log_p: np.ndarray, temperature: float, bias: np.ndarray | None = None) -> np.ndarray:
    """Calibrated probabilities ``softmax(log_p / T + b)``.

    Parameters
    ----------
    log_p : array (n, K)
        Log class probabilities (clipped, see the module notes).
    temperature : float
        ``T > 0``.
    bias : array (K,), optional
        Added to the scaled log probabilities (``bias[0] = 0`` by convention).

    Returns
    -------
    array (n, K), rows summing to 1.
    """
    z = np.asarray(log_p, dtype=float) / temperature
    if bias is not None:
        z = z + np.asarray(bias, dtype=float)[None, :]
    return np.exp(log_softmax(z, axis=1))


def fit_temperature(
    log_p: np.ndarray,
    y: np.ndarray,
    bias: bool = False,
    prior_sd: float | None = PRIOR_SD,
) -> tuple[float, np.ndarray]:
    """Penalised maximum-likelihood temperature (and biases) on labelled items.

    Parameters
    ----------
    log_p : array (n, K)
        Log class probabilities of the labelled items.
    y : int array (n,)
        True class codes ``0 .. K-1``.
    bias : bool
        Also fit ``b_1 .. b_{K-1}`` (``b_0 = 0``).
    prior_sd : float or None
        Sd of the normal prior on ``log T`` and each bias; None = plain ML.

    Returns
    -------
    temperature : float
    b : array (K,)
        Zeros without ``bias``.
    """
    log_p = np.asarray(log_p, dtype=float)
    n, K = log_p.shape
    rows = np.arange(n)
    onehot = np.zeros((n, K))
    onehot[rows, y] = 1.0
    prec = 0.0 if prior_sd is None else 1.0 / prior_sd**2

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        log_t = x[0]
        b = np.concatenate([[0.0], x[1:]]) if bias else np.zeros(K)
        z = log_p * np.exp(-log_t) + b[None, :]
        lq = log_softmax(z, axis=1)
        nll = -lq[rows, y].sum() + 0.5 * prec * float(x @ x)
        resid = np.exp(lq) - onehot  # d nll / d z
        g_logt = -float(np.sum(resid * log_p)) * np.exp(-log_t)
        grad = [g_logt]
        if bias:
            grad.extend(resid.sum(axis=0)[1:])
        return nll, np.asarray(grad) + prec * x

    if not bias:  # one parameter: bounded Brent search on log T
        picked = log_p[rows, y].sum()

        def nll_t(log_t: float) -> float:
            z = log_p * np.exp(-log_t)
            m = z.max(axis=1)
            lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
            return float(lse.sum() - picked * np.exp(-log_t) + 0.5 * prec * log_t**2)

        res = minimize_scalar(nll_t, bounds=LOG_T_BOUNDS, method="bounded", options={"xatol": 1e-7})
        return float(np.exp(res.x)), np.zeros(K)
    # start from the temperature alone; BFGS (log T clipped to its bounds afterwards)
    t0, _ = fit_temperature(log_p, y, bias=False, prior_sd=prior_sd)
    x0 = np.concatenate([[np.log(t0)], np.zeros(K - 1)])
    res = minimize(objective, x0, jac=True, method="BFGS", options={"gtol": 1e-6})
    log_t = float(np.clip(res.x[0], *LOG_T_BOUNDS))
    return float(np.exp(log_t)), np.concatenate([[0.0], res.x[1:]])


def _log_softmax_grid(log_p: np.ndarray, log_t: np.ndarray) -> np.ndarray:
    """``log softmax(log_p / T)`` for every ``log T`` of the grid: array (G, n, K)."""
    z = log_p[None, :, :] * np.exp(-np.asarray(log_t, dtype=float))[:, None, None]
    return z - logsumexp(z, axis=2, keepdims=True)


def _softmax_grid(log_p: np.ndarray, log_t: np.ndarray) -> np.ndarray:
    """``softmax(log_p / T)`` for every ``log T`` of the grid: array (G, n, K)."""
    return np.exp(_log_softmax_grid(log_p, log_t))


def confidence_prior(
    p_all: np.ndarray, floor: float, log_t_grid: np.ndarray = LOG_T_GRID, max_items: int = PRIOR_MAX_ITEMS
) -> np.ndarray:
    """Log prior weights over ``log T`` uniform in the mean calibrated confidence of all items.

    ``m(T) = mean_i max_k softmax_k(log max(p_i, c) / T)`` falls from about
    1 (``T -> 0``) to ``1 / K`` (``T -> inf``).  Grid point ``j`` receives
    the prior mass ``m(T_{j-1/2}) - m(T_{j+1/2})`` (cell edges at the
    midpoints of the grid, the outer edges at its ends), so the prior is
    uniform in ``m`` over what the grid can reach.  It uses no gold label.

    Parameters
    ----------
    p_all : array (n, K)
        Class probabilities of all items of the fit (at most ``max_items``
        of them, evenly spaced in the given order, are used).
    floor : float
    log_t_grid : array (G,)
        Increasing.

    Returns
    -------
    array (G,)
        Log prior weights summing (in probability) to 1; uniform in ``log T``
        if ``m`` does not vary (all items' probabilities uniform).
    """
    p_all = np.asarray(p_all, dtype=float)
    if len(p_all) > max_items:
        p_all = p_all[np.linspace(0, len(p_all) - 1, max_items).round().astype(np.int64)]
    g = np.asarray(log_t_grid, dtype=float)
    edges = np.concatenate([[g[0]], 0.5 * (g[1:] + g[:-1]), [g[-1]]])
    m = _softmax_grid(_log_probs(p_all, floor), edges).max(axis=2).mean(axis=1)
    mass = np.maximum(-np.diff(m), 0.0)
    if not mass.sum() > 1e-12:
        return np.full(g.size, -np.log(g.size))
    with np.errstate(divide="ignore"):
        return np.log(mass / mass.sum())


def fit_bayes_temperature(
    p: np.ndarray,
    y: np.ndarray,
    log_priors: dict[float, np.ndarray],
    log_t_grid: np.ndarray = LOG_T_GRID,
) -> tuple[float, np.ndarray]:
    """Floor and posterior weights of ``log T`` on labelled items (``method="bayes-temperature"``).

    For each candidate floor ``c`` the posterior over the grid is
    ``prior_c(T) * prod_i softmax(log max(p_i, c) / T)[y_i]``; the floor with
    the largest marginal likelihood (sum over the grid) is kept, the
    smallest of tied floors.

    Parameters
    ----------
    p : array (n, K)
        Class probabilities of the labelled items.
    y : int array (n,)
    log_priors : dict floor -> array (G,)
        :func:`confidence_prior` of every candidate floor.
    log_t_grid : array (G,)

    Returns
    -------
    floor : float
    weights : array (G,)
        Posterior probabilities of the grid points, summing to 1.
    """
    rows = np.arange(len(y))
    best = None
    for c, log_prior in log_priors.items():
        lq = _log_softmax_grid(_log_probs(p, c), log_t_grid)[:, rows, y]
        log_post = log_prior + lq.sum(axis=1)
        log_ml = float(logsumexp(log_post))
        if best is None or log_ml > best[0] + 1e-9 * max(1.0, abs(best[0])):
            best = (log_ml, c, log_post)
    assert best is not None, "log_priors is empty"  # one entry per candidate floor, at least one
    _, c, log_post = best
    w = np.exp(log_post - log_post.max())
    return c, w / w.sum()


def apply_bayes_temperature(
    log_p: np.ndarray, weights: np.ndarray, log_t_grid: np.ndarray = LOG_T_GRID, chunk: int = 4096
) -> np.ndarray:
    """Posterior-predictive probabilities ``sum_j w_j softmax(log_p / T_j)``.

    Each term keeps the order of the classes within an item, so the mixture
    does too (the most probable class is unchanged).  Grid points with
    weight below ``1e-12`` of the largest are skipped.

    Parameters
    ----------
    log_p : array (n, K)
        Floored log class probabilities.
    weights : array (G,)
    log_t_grid : array (G,)

    Returns
    -------
    array (n, K), rows summing to 1.
    """
    log_p = np.asarray(log_p, dtype=float)
    w = np.asarray(weights, dtype=float)
    keep = w > 1e-12 * w.max()
    w, g = w[keep] / w[keep].sum(), np.asarray(log_t_grid, dtype=float)[keep]
    out = np.empty_like(log_p)
    for start in range(0, len(log_p), chunk):  # bounded memory: G x chunk x K
        sl = slice(start, start + chunk)
        out[sl] = np.tensordot(w, _softmax_grid(log_p[sl], g), axes=1)
    return out / out.sum(axis=1, keepdims=True)


def _weighted_median_t(weights: np.ndarray, log_t_grid: np.ndarray = LOG_T_GRID) -> float:
    """Posterior median of ``T`` on the grid."""
    return float(np.exp(log_t_grid[np.searchsorted(np.cumsum(weights), 0.5)]))


def stratified_folds(y: np.ndarray, cv: int, rng: np.random.Generator) -> np.ndarray:
    """Fold number ``0 .. cv-1`` of each item, stratified by class.

    Items of each class are shuffled and dealt round-robin, continuing the
    deal across classes, so fold sizes differ by at most one and each class
    is spread as evenly as its count allows.
    """
    y = np.asarray(y)
    order = rng.permutation(y.size)
    order = order[np.argsort(y[order], kind="stable")]
    folds = np.empty(y.size, dtype=np.int64)
    folds[order] = np.arange(y.size) % cv
    return folds


def min_gold_items(method: str, n_categories: int, cv: int) -> int:
    """Gold items :func:`calibrate` needs: ``max(2 * cv, 10 * parameters)``.

    One parameter for ``"temperature"`` and ``"bayes-temperature"``, ``K``
    (temperature and K - 1 biases) for ``"temperature+bias"``; at least two
    items per cross-validation fold.
    """
    n_params = n_categories if method == "temperature+bias" else 1
    return max(2 * cv, 10 * n_params)


# ------------------------------------------------------------------ labelled layer
@dataclass(frozen=True)
class CalibrationResult:
    """What :func:`calibrate` returns.

    Attributes
    ----------
    probabilities : DataFrame (items, categories)
        Calibrated class probabilities of every item, same index and
        columns as the input probabilities.
    method : str
    temperature : float
        ``T`` fitted on all gold items.
    floor : float
        Floor ``c`` of the probabilities, fitted on all gold items (or given).
    bias : Series (categories,)
        ``b_k`` (0 for the first category; all 0 for ``"temperature"``).
    gold_items : Index
        The gold items used, in the order given.
    scores : DataFrame
        Rows ``"before"`` (the input probabilities of the gold items) and
        ``"after"`` (pooled out-of-fold calibrated probabilities); columns
        ``n, accuracy, macro_f1, ece, brier, log_loss``.
    folds : Series
        Cross-validation fold of each gold item.
    fold_temperatures : array (cv,)
        Temperature fitted without each fold.
    fold_floors : array (cv,)
        Floor fitted without each fold.
    cv, seed : int
    prior_sd : float or None
        Used by ``"temperature"`` and ``"temperature+bias"`` only.
    temperature_weights : array (G,) or None
        ``"bayes-temperature"``: posterior probabilities of the grid
        ``LOG_T_GRID`` of ``log T`` fitted on all gold items (the map is
        their mixture; ``temperature`` is then the posterior median of T).
        None for the other methods.
    ece_noise : float
        The noise floor of the cross-validated ECE
        (``ece_noise_floor`` of the out-of-fold
        calibrated probabilities, 200 label draws seeded by ``seed``): the
        ECE that perfectly calibrated probabilities would score on these
        gold items.  An ECE ``"after"`` near it is as good as this many
        gold items can show.
    """

    probabilities: pd.DataFrame
    method: str
    temperature: float
    floor: float
    bias: pd.Series
    gold_items: pd.Index
    scores: pd.DataFrame
    folds: pd.Series
    fold_temperatures: np.ndarray
    fold_floors: np.ndarray
    cv: int
    seed: int | None
    prior_sd: float | None
    temperature_weights: np.ndarray | None = None
    ece_noise: float = float("nan")

    def apply(self, probs: pd.DataFrame) -> pd.DataFrame:
        """Apply the fitted map to other class probabilities with the same categories."""
        if not isinstance(probs, pd.DataFrame) or list(probs.columns) != list(self.probabilities.columns):
            raise ValueError(f"probs must be a DataFrame with columns {list(self.probabilities.columns)}")
        log_p = _log_probs(_probs(probs.to_numpy(dtype=float)), self.floor)
        if self.temperature_weights is not None:
            q = apply_bayes_temperature(log_p, self.temperature_weights)
        else:
            q = apply_temperature(log_p, self.temperature, self.bias.to_numpy())
        return pd.DataFrame(q, index=probs.index.copy(), columns=probs.columns.copy())

    def __repr__(self) -> str:
        b, a = self.scores.loc["before"], self.scores.loc["after"]
        return (
            f"CalibrationResult({self.method}, T = {self.temperature:.3g}, floor {self.floor:.3g}, "
            f"{len(self.gold_items)} gold items, {self.cv}-fold CV: ECE {b['ece']:.3f} -> {a['ece']:.3f} "
            f"(noise floor {self.ece_noise:.3f}), log-loss {b['log_loss']:.3f} -> {a['log_loss']:.3f}, "
            f"accuracy {b['accuracy']:.3f} -> {a['accuracy']:.3f})"
        )


def _as_gold(gold: Any) -> pd.Series:
    if isinstance(gold, dict):
        gold = pd.Series(gold)
    if isinstance(gold, pd.DataFrame):
        cols = list(gold.columns)
        if "item" in cols and len(cols) == 2:
            label = next(c for c in cols if c != "item")
            gold = gold.set_index("item")[label]
        elif len(cols) == 2:
            gold = gold.set_index(cols[0])[cols[1]]
        else:
            raise ValueError(f"gold as a DataFrame must have two columns (item, label); got columns {cols}")
    if not isinstance(gold, pd.Series):
        raise TypeError(
            f"gold must be a Series (item -> label), a dict or a DataFrame (item, label); got {type(gold).__name__}"
        )
    if gold.isna().any():
        raise ValueError(f"gold has missing labels for items {list(gold.index[gold.isna()][:8])}")
    if gold.index.has_duplicates:
        dup = gold.index[gold.index.duplicated()].unique()
        raise ValueError(f"gold lists items more than once: {list(dup[:8])}")
    return gold


def check_gold_not_known(
    gold_items: pd.Index | Sequence, known_items: pd.Index | Sequence, where: str = "known="
) -> None:
    """Refuse gold items that the fit was given as known classes.

    A known item's class probabilities are one-hot at its given class by
    construction, so calibrating on it would teach the map that the fit is
    never wrong and make every other item *more* confident.

    Parameters
    ----------
    gold_items, known_items : sequences of item labels
    where : str
        How the error message names the known items' source.

    Raises
    ------
    ValueError
        Naming (up to 8 of) the items in both.
    """
    both = pd.Index(gold_items).intersection(pd.Index(known_items))
    if len(both):
        raise ValueError(
            f"{len(both)} gold item(s) were also given to the fit as known classes ({where}): {list(both[:8])}"
            f"{' ...' if len(both) > 8 else ''}; a known item's class probabilities are one-hot by construction, "
            "so calibrating on it would teach the map that the fit is never wrong. Calibrate on gold items the "
            "fit did not know, or refit without these as known"
        )


def _fit_known_items(fit_or_probs: Any, index: pd.Index) -> pd.Index:
    """The items a fit conditioned on as known (its ``known`` codes, -1 = unknown); empty for a DataFrame."""
    codes = None if isinstance(fit_or_probs, pd.DataFrame) else getattr(fit_or_probs, "known", None)
    if codes is None:
        return pd.Index([])
    codes = np.asarray(codes)
    if codes.shape != (len(index),):
        return pd.Index([])
    return index[codes >= 0]


def check_gold(
    gold: pd.Series | pd.DataFrame | dict,
    items: pd.Index | Sequence,
    categories: pd.Index | Sequence,
    method: str = "bayes-temperature",
    cv: int = 5,
    what: str = "the fit",
) -> tuple[pd.Series, np.ndarray]:
    """Check gold labels against the items and categories they calibrate, before any fitting.

    Parameters
    ----------
    gold : Series, dict or DataFrame
        As :func:`calibrate` takes it.
    items, categories : sequences
        The items (rows) and categories (columns) of the class probabilities.
    method, cv
        Decide how many gold items are needed (:func:`min_gold_items`).
    what : str
        How the error messages name the items' source.

    Returns
    -------
    gold : Series (item -> label)
    y : int array
        Category code of each gold item.

    Raises
    ------
    ValueError
        Items not in ``items`` (named), labels not in ``categories`` (named),
        or fewer gold items than needed (with how many are needed).
    """
    gold = _as_gold(gold)
    missing = gold.index[~gold.index.isin(pd.Index(items))]
    if len(missing):
        raise ValueError(
            f"{len(missing)} of the {len(gold)} gold items are not items of {what}: [{labels_repr(missing)}]"
        )
    cats = pd.Index(categories)
    y = cats.get_indexer(gold.to_numpy())
    if (y < 0).any():
        bad = pd.unique(gold.to_numpy()[y < 0])
        raise ValueError(
            f"gold labels [{labels_repr(bad)}] are not categories of {what} [{labels_repr(cats, limit=20)}]"
        )
    needed = min_gold_items(method, len(cats), int(cv))
    if gold.size < needed:
        raise ValueError(
            f"calibrate(method={method!r}, cv={cv}) needs at least {needed} gold items "
            f"(K = {len(cats)}); {gold.size} were given"
        )
    return gold, y


def calibrate(
    fit_or_probs: Any,
    gold: pd.Series | pd.DataFrame | dict,
    method: CalibrationMethod = "bayes-temperature",
    cv: int = 5,
    seed: int | None = None,
    prior_sd: float | None = PRIOR_SD,
    floor: float | str = "fit",
) -> CalibrationResult:
    """Calibrate class probabilities on gold items, with a cross-validated estimate of the gain.

    Parameters
    ----------
    fit_or_probs : fit or DataFrame
        Any fit with ``class_probabilities()`` (EM, optimisation, MCMC, ...,
        also a the result of :func:`pyrater.majority_vote`), or a DataFrame of
        class probabilities (items x categories).  Neither is modified.
    gold : Series, dict or DataFrame
        True category per gold item: ``{item: label}``, or a DataFrame with
        columns ``item`` and one label column (or any two columns: item,
        label).  Every item must be a row of the probabilities and every
        label one of their columns.
    method : {"bayes-temperature", "temperature", "temperature+bias"}
        ``"bayes-temperature"`` (default): posterior-predictive temperature
        scaling, averaging the map over the posterior of ``T`` under a prior
        uniform in the mean calibrated confidence (see the module notes);
        ``"temperature"``: one penalised-ML temperature; both keep the most
        probable class of every item.  ``"temperature+bias"``: penalised-ML
        temperature and one bias per category.
    cv : int
        Cross-validation folds (>= 2) over the gold items.
    seed : int, optional
        Seed of the fold assignment.
    prior_sd : float or None
        ``"temperature"`` and ``"temperature+bias"``: sd of the normal prior
        on ``log T`` and the biases (see the module notes); None = plain
        maximum likelihood.  Not used by ``"bayes-temperature"``.
    floor : float or "fit"
        Floor of the probabilities before the logarithm: ``"fit"`` chooses
        it with the temperature (see the module notes); a number in
        ``(0, 0.5 / K]`` fixes it (``1e-15``: plain temperature scaling).

    Returns
    -------
    CalibrationResult

    Raises
    ------
    ValueError
        Unknown method, bad ``cv``, gold items not in the fit, gold items
        the fit was given as known classes (``known=``), gold labels that
        are not categories, or fewer gold items than
        :func:`min_gold_items`.
    """
    if method not in CALIBRATION_METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {CALIBRATION_METHODS}")
    check_int("cv (folds of the gold items)", cv, 2)
    if prior_sd is not None and not (np.isfinite(prior_sd) and prior_sd > 0):
        raise ValueError(f"prior_sd must be a positive number or None, got {prior_sd!r}")
    probs = as_probabilities(fit_or_probs)
    if not (isinstance(floor, str) and floor == "fit"):
        if isinstance(floor, str) or not (0 < float(floor) <= 0.5 / probs.shape[1]):
            raise ValueError(
                f"floor must be 'fit' or a number in (0, 0.5 / K = {0.5 / probs.shape[1]:.3g}], got {floor!r}"
            )
    gold, y = check_gold(gold, probs.index, probs.columns, method, int(cv))
    check_gold_not_known(gold.index, _fit_known_items(fit_or_probs, probs.index))
    cats = pd.Index(probs.columns)
    K = len(cats)

    p_all = probs.to_numpy(dtype=float)
    rows = probs.index.get_indexer(gold.index)
    p = p_all[rows]
    bias = method == "temperature+bias"
    bayes = method == "bayes-temperature"
    if bayes:  # priors from all items' probabilities (no labels), one per candidate floor
        log_priors = {c: confidence_prior(p_all, c) for c in _candidate_floors(floor, K)}

    def fit_map(pf: np.ndarray, yf: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray | None]:
        if bayes:
            c, w = fit_bayes_temperature(pf, yf, log_priors)
            return c, _weighted_median_t(w), np.zeros(K), w
        c, t, b = fit_calibration_map(pf, yf, bias=bias, prior_sd=prior_sd, floor=floor)
        return c, t, b, None

    def apply_map(pf: np.ndarray, c: float, t: float, b: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        if w is not None:
            return apply_bayes_temperature(_log_probs(pf, c), w)
        return apply_temperature(_log_probs(pf, c), t, b)

    rng = np.random.default_rng(seed)
    folds = stratified_folds(y, int(cv), rng)
    oof = np.empty_like(p)
    fold_t = np.empty(int(cv))
    fold_c = np.empty(int(cv))
    for f in range(int(cv)):
        test = folds == f
        c, t, b, w = fit_map(p[~test], y[~test])
        fold_t[f], fold_c[f] = t, c
        oof[test] = apply_map(p[test], c, t, b, w)
    before = score_arrays(y, p, labels=np.arange(K))
    after = score_arrays(y, oof, labels=np.arange(K))
    scores = pd.DataFrame([before, after], index=pd.Index(["before", "after"], name="probabilities"))[list(METRICS)]
    noise = ece_noise_floor(oof, reps=200, seed=rng)

    c, t, b, w = fit_map(p, y)
    q = apply_map(p_all, c, t, b, w)
    return CalibrationResult(
        probabilities=pd.DataFrame(q, index=probs.index.copy(), columns=cats.copy()),
        method=method,
        temperature=t,
        floor=c,
        bias=pd.Series(b, index=cats.copy(), name="bias"),
        gold_items=gold.index.copy(),
        scores=scores,
        folds=pd.Series(folds, index=gold.index.copy(), name="fold"),
        fold_temperatures=fold_t,
        fold_floors=fold_c,
        cv=int(cv),
        seed=seed,
        prior_sd=prior_sd,
        temperature_weights=w,
        ece_noise=noise,
    )
