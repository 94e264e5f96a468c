"""Ordinal raters: an ordered-logit rater model for ordered categories (shift and scale per rater).

For categories ``0 < 1 < ... < K-1`` (K >= 3) the true class ``k`` sits at
``k`` on a latent scale, the cutpoints between ratings are the fixed
midpoints ``c_l = l - 1/2`` (``l = 1 .. K-1``; ``c_0 = -inf``, ``c_K = +inf``)
and rater ``j`` perceives the class with its own shift ``b_j`` (bias: a
positive shift rates high) and scale ``sigma_j > 0`` (noise):

    P(rating <= l | true class k, rater j) = logistic((c_{l+1} - k - b_j) / sigma_j),

so ``theta[j, k, l] = F((l + 1/2 - k - b_j) / sigma_j) - F((l - 1/2 - k - b_j) / sigma_j)``
with ``F`` the logistic CDF: a near miss is more likely than a far one, and a
rater's whole error matrix has two parameters.  Priors: ``pi ~
Dirichlet(alpha)``, ``b_j ~ Normal(0, shift_sd)``, ``log sigma_j ~
Normal(log_scale_mean, log_scale_sd)``.

This is the ordered-logit ("graded response") rater of item response theory
with one latent item trait, the true class (Samejima 1969; the rater-bias
ordered-probit/logit models of Johnson & Albert 1999, ch. 5-6, where raters
have their own cutpoints; here the cutpoints are common and each rater's
shift and scale move them), marginalised over a latent class as in
Dawid & Skene (1979).  Stan program ``stan/ordinal.stan``; native EM
(:func:`pyrater.em`) with the Newton M-step of :func:`m_step_raters`.

Lapses (``Ordinal(lapse=True)``).  With probability ``g_j`` rater ``j``
lapses and gives a rating at random, so that

    theta[j, k, l] = (1 - g_j) * ordinal[j, k, l] + g_j / K,

``g_j ~ Beta(lapse_prior)`` (default Beta(2, 20): mean 0.09, mode 0.05).  A
logistic tail makes a rating two or more categories away very unlikely; real
raters give such far misses far more often (inattention, a slip of the
mouse), and without a lapse the likelihood can only explain them with a large
scale, which blurs the rater's near-miss information too.  The lapse is the
"guessing" parameter of item response theory (the 3PL) and MACE's spammer
(Hovy et al. 2013) applied to an ordinal rater.  EM's M-step then splits each
expected count into its lapse and ordinal parts (an inner EM step, so EM
stays monotone) before the Newton step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import betaln, xlog1py, xlogy

from .base import ModelFamily, interior, numeric_array, resolve_alpha
from .registry import register
from .simulate import (
    SeedLike,
    Simulation,
    _check_categories,
    _finish,
    _infer_k,
    _pi,
    _start,
)

__all__ = [
    "Ordinal",
    "simulate_ordinal",
    "ordinal_theta",
    "ordinal_log_theta",
    "ordinal_parameters",
    "m_step_raters",
    "m_step_lapse",
]

#: default sd of the Normal prior on a rater's shift (one class width: a rater who rates a class high)
DEFAULT_SHIFT_SD = 1.0
#: default mean of the Normal prior on log sigma_j: sigma = e^-1 = 0.37 puts 0.58 on the right rating
#: of an inner class, about rater's default accuracy 0.6
DEFAULT_LOG_SCALE_MEAN = -1.0
#: default sd of the Normal prior on log sigma_j (sigma from 0.05 to 2.7 within 2 sd)
DEFAULT_LOG_SCALE_SD = 1.0
#: default Beta prior on a rater's lapse probability g_j (mean 0.09, mode 0.05)
DEFAULT_LAPSE_PRIOR = (2.0, 20.0)
#: EM's starting lapse probability
LAPSE_START = 0.05
#: bounds on log sigma_j in the EM M-step (maximum likelihood can push a perfect rater to sigma = 0)
LOG_SCALE_BOUNDS = (-7.0, 5.0)
#: smallest probability of a rating (keeps log theta finite where exp underflows)
TINY = 1e-300


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _check_k(K: int) -> int:
    if int(K) != K or K < 3:
        raise ValueError(
            f"the ordinal model needs K >= 3 ordered categories; got K = {K!r} (with K = 2 it is a "
            "reparametrisation of the class-conditional model: use model='class_conditional')"
        )
    return int(K)


def _z(shift: np.ndarray, scale: np.ndarray, K: int) -> np.ndarray:
    """Standardised cutpoints ``z[j, k, m] = (m - 1/2 - k - b_j) / sigma_j``, ``m = 0 .. K`` (ends +-inf)."""
    m = np.arange(K + 1, dtype=float) - 0.5
    k = np.arange(K, dtype=float)
    z = (m[None, None, :] - k[None, :, None] - shift[:, None, None]) / scale[:, None, None]
    z[..., 0] = -np.inf
    z[..., K] = np.inf
    return z


def _log_theta_z(z: np.ndarray) -> np.ndarray:
    """``log(F(z[..., l+1]) - F(z[..., l]))`` (..., K), stable in both tails."""
    a, b = z[..., 1:], z[..., :-1]
    with np.errstate(invalid="ignore", over="ignore"):
        out = _log_sigmoid(a) - np.logaddexp(0.0, b) + np.log1p(-np.exp(b - a))
    return np.maximum(out, np.log(TINY))


def ordinal_log_theta(shift: Any, scale: Any, K: int) -> np.ndarray:
    """Log error matrices of the ordinal model, (J, K, K).

    Parameters
    ----------
    shift, scale : array (J,)
        Rater shifts ``b_j`` and scales ``sigma_j > 0``.
    K : int
        Number of ordered categories (>= 3).
    """
    K = _check_k(K)
    shift = np.atleast_1d(np.asarray(shift, dtype=float))
    scale = np.atleast_1d(np.asarray(scale, dtype=float))
    if shift.ndim != 1 or shift.shape != scale.shape:
        raise ValueError(f"shift and scale must have the same shape (J,); got {shift.shape} and {scale.shape}")
    if np.any(~(scale > 0)):
        raise ValueError(f"scale must be > 0; got min {scale.min()!r}")
    return _log_theta_z(_z(shift, scale, K))


def ordinal_theta(shift: Any, scale: Any, K: int) -> np.ndarray:
    """Error matrices of the ordinal model, (J, K, K): ``theta[j, k, l] = P(rater j says l | class k)``.

    Examples
    --------
    >>> from pyrater.models import ordinal_theta
    >>> th = ordinal_theta([0.0], [0.3], 4)
    >>> bool(th[0, 1, 0] > th[0, 1, 3])  # a near miss is likelier than a far one
    True
    """
    theta = np.exp(ordinal_log_theta(shift, scale, K))
    return theta / theta.sum(axis=-1, keepdims=True)


def lapse_theta(theta: np.ndarray, lapse: Any) -> np.ndarray:
    """``(1 - g_j) theta[j] + g_j / K``: the error matrices (J, K, K) of raters who lapse with probability ``g_j``."""
    g = np.asarray(lapse, dtype=float)[:, None, None]
    return (1.0 - g) * theta + g / theta.shape[-1]


def ordinal_parameters(theta: Any) -> dict[str, np.ndarray]:
    """The shift and scale of each rater whose error matrix is ``theta`` (J, K, K) (exact for ordinal matrices).

    ``logit P(rating <= l | k) = (l + 1/2 - k - b_j) / sigma_j`` is linear in
    ``l - k``; a least-squares line through the cumulative logits (those
    not saturated at 0 or 1) gives ``1 / sigma_j`` (slope) and ``-b_j / sigma_j``
    (intercept).  Used to start Stan's optimiser at an EM mode and to report
    the parameters of an EM fit.

    Returns
    -------
    dict
        ``shift`` (J,), ``scale`` (J,).
    """
    theta = np.asarray(theta, dtype=float)
    if theta.ndim != 3 or theta.shape[1] != theta.shape[2]:
        raise ValueError(f"theta must have shape (J, K, K); got {theta.shape}")
    J, K, _ = theta.shape
    _check_k(K)
    cum = np.cumsum(theta, axis=-1)[..., :-1]  # (J, K, K-1): P(rating <= l)
    x = (np.arange(K - 1)[None, :] + 0.5 - np.arange(K)[:, None]).astype(float)  # c_{l+1} - k
    ok = (cum > 1e-9) & (cum < 1 - 1e-9)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(cum) - np.log1p(-cum)
    w = ok.astype(float)
    y = np.where(ok, y, 0.0)
    n = w.sum(axis=(1, 2))
    xm = np.einsum("jkl,kl->j", w, x) / np.maximum(n, 1)
    ym = np.einsum("jkl->j", w * y) / np.maximum(n, 1)
    dx = x[None] - xm[:, None, None]
    sxx = np.einsum("jkl->j", w * dx * dx)
    sxy = np.einsum("jkl->j", w * dx * (y - ym[:, None, None]))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = sxy / sxx
    slope = np.where((n >= 2) & (sxx > 0) & (slope > 0), slope, np.exp(-DEFAULT_LOG_SCALE_MEAN))
    intercept = ym - slope * xm
    return {"shift": -intercept / slope, "scale": 1.0 / slope}


# ------------------------------------------------------------------ EM M-step


def _objective(
    shift: np.ndarray, log_scale: np.ndarray, N: np.ndarray, prior: dict | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per rater: ``sum_{k,l} N[j,k,l] log theta[j,k,l]`` (+ log prior) (J,) and its gradient (J, 2)."""
    K = N.shape[1]
    z = _z(shift, np.exp(log_scale), K)
    lt = _log_theta_z(z)
    f = np.einsum("jkl,jkl->j", N, lt)
    # log f(z) of the logistic density; f(+-inf) = z f(z) = 0 at the open ends
    with np.errstate(invalid="ignore", over="ignore"):
        logf = _log_sigmoid(z) + _log_sigmoid(-z)
        zf = np.where(np.isfinite(z), z, 0.0)
        # ratios to theta of the density at the upper (a) and lower (b) cut of each rating
        ra = np.exp(logf[..., 1:] - lt)
        rb = np.exp(logf[..., :-1] - lt)
    ra = np.where(np.isfinite(z[..., 1:]), ra, 0.0)
    rb = np.where(np.isfinite(z[..., :-1]), rb, 0.0)
    scale = np.exp(log_scale)
    # d log theta / d b = -(f(a) - f(b)) / (sigma theta); d / d log sigma = (-a f(a) + b f(b)) / theta
    g_b = -np.einsum("jkl,jkl->j", N, ra - rb) / scale
    g_u = np.einsum("jkl,jkl->j", N, -zf[..., 1:] * ra + zf[..., :-1] * rb)
    if prior is not None:
        sd_b, m_u, sd_u = (float(prior[k]) for k in ("shift_sd", "log_scale_mean", "log_scale_sd"))
        f = f + _log_normal(shift, 0.0, sd_b) + _log_normal(log_scale, m_u, sd_u)
        g_b = g_b - shift / sd_b**2
        g_u = g_u - (log_scale - m_u) / sd_u**2
    return f, np.stack([g_b, g_u], axis=1)


def _log_normal(x: np.ndarray, m: float, sd: float) -> np.ndarray:
    return -0.5 * ((x - m) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


def _load_kernel() -> Any:
    """The numba M-step (:mod:`pyrater.models._ordinal_kernel`), or None without numba."""
    try:
        from . import _ordinal_kernel
    except ImportError:  # pragma: no cover - numba is a dependency of the fast paths only
        return None
    return _ordinal_kernel


def m_step_raters(
    shift: np.ndarray,
    log_scale: np.ndarray,
    N: np.ndarray,
    prior: dict | None,
    max_iter: int = 20,
    tol: float = 1e-9,
    compiled: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise each rater's expected complete-data log-likelihood (+ log prior) over ``(b_j, log sigma_j)``.

    The raters are independent given the expected counts ``N`` (J, K, K)
    (``N[j, k, l]`` the expected number of times rater ``j`` said ``l`` to an
    item of class ``k``), so the problem is J two-parameter problems, solved
    together by damped Newton steps: the exact gradient, a 2 x 2 Hessian per
    rater by forward differences of it (two gradient passes give all J),
    shifted to be negative definite, and a backtracking line search per rater
    that never lowers its objective (so EM stays monotone).  ``log sigma_j``
    is kept within :data:`LOG_SCALE_BOUNDS`.

    With ``compiled`` (and numba importable) the same Newton steps run per
    rater in :mod:`pyrater.models._ordinal_kernel` with the exact Hessian
    (much faster: the numpy version below is the reference and the fallback).

    Returns
    -------
    shift, log_scale : arrays (J,)
    """
    kernel = _load_kernel() if compiled else None
    if kernel is not None:
        b = np.array(shift, dtype=np.float64)
        u = np.array(log_scale, dtype=np.float64)
        pri = prior if prior is not None else {"shift_sd": 1.0, "log_scale_mean": 0.0, "log_scale_sd": 1.0}
        kernel.newton_raters(
            np.ascontiguousarray(N, dtype=np.float64),
            b,
            u,
            prior is not None,
            float(pri["shift_sd"]),
            float(pri["log_scale_mean"]),
            float(pri["log_scale_sd"]),
            *LOG_SCALE_BOUNDS,
            int(max_iter),
            float(tol),
        )
        return b, u
    b = np.array(shift, dtype=float)
    u = np.clip(np.array(log_scale, dtype=float), *LOG_SCALE_BOUNDS)
    lo, hi = LOG_SCALE_BOUNDS
    h = 1e-6
    f, g = _objective(b, u, N, prior)
    active = np.ones(b.size, dtype=bool)
    for _ in range(max_iter):
        if not active.any():
            break
        H = np.empty((b.size, 2, 2))  # forward differences of the exact gradient: one pass per column
        H[:, :, 0] = (_objective(b + h, u, N, prior)[1] - g) / h
        H[:, :, 1] = (_objective(b, u + h, N, prior)[1] - g) / h
        H = 0.5 * (H + H.transpose(0, 2, 1))
        # shift the Hessian to be negative definite
        top = np.linalg.eigvalsh(H)[:, -1]
        mag = np.maximum(1.0, np.abs(H).max(axis=(1, 2)))
        damp = np.maximum(0.0, top + 1e-6 * mag)
        H = H - damp[:, None, None] * np.eye(2)
        step = -np.linalg.solve(H, g[:, :, None])[:, :, 0]
        step[~active] = 0.0
        # keep steps moderate (the objective is far from quadratic in the tails)
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, 2.0 / np.maximum(big, 1e-300))[:, None]
        t = np.ones(b.size)
        accepted = ~active
        nb, nu, fn, gn = b.copy(), u.copy(), f.copy(), g.copy()
        for _ls in range(40):  # backtracking: a rater's objective never decreases
            tb = b + t * step[:, 0]
            tu = np.clip(u + t * step[:, 1], lo, hi)
            ft, gt = _objective(tb, tu, N, prior)
            ok = ~accepted & (ft >= f - 1e-12 * np.maximum(1.0, np.abs(f)))
            nb[ok], nu[ok], fn[ok], gn[ok] = tb[ok], tu[ok], ft[ok], gt[ok]
            accepted |= ok
            if accepted.all():
                break
            t = np.where(accepted, t, t * 0.5)
        moved = np.maximum(np.abs(nb - b), np.abs(nu - u))
        b, u, f, g = nb, nu, fn, gn
        active = active & (moved > tol) & accepted
    return b, u


def m_step_lapse(
    shift: np.ndarray,
    log_scale: np.ndarray,
    lapse: np.ndarray,
    N: np.ndarray,
    prior: dict | None,
    n_inner: int = 3,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The M-step of raters who lapse: raise ``sum N log theta`` (+ log prior) over ``(b_j, log sigma_j, g_j)``.

    Each rating is either a lapse (probability ``g_j / K`` of its value) or an
    ordinal rating (``(1 - g_j) ordinal[j, k, l]``).  An inner EM step splits the
    expected counts ``N`` (J, K, K) into the two parts at the current
    parameters, then sets ``g_j`` to its Beta posterior mode (ML: the share of
    lapses) and runs :func:`m_step_raters` on the ordinal part.  Each inner step
    raises the objective (a generalised EM step), so the outer EM stays
    monotone.  ``g_j`` is kept within ``[0, 1 - 1e-9]``.

    Returns
    -------
    shift, log_scale, lapse : arrays (J,)
    """
    K = N.shape[1]
    b = np.array(shift, dtype=float)
    u = np.array(log_scale, dtype=float)
    g = np.array(lapse, dtype=float)
    n_j = np.einsum("jkl->j", N)
    if prior is not None:
        a1, a2 = (float(v) for v in np.asarray(prior["lapse_prior"], dtype=float))
    for _ in range(n_inner):
        ordinal = np.exp(ordinal_log_theta(b, np.exp(u), K))
        ordinal /= ordinal.sum(axis=-1, keepdims=True)
        mix = lapse_theta(ordinal, g)
        share = np.where(N > 0, (g[:, None, None] / K) / mix, 0.0)  # P(lapse | rating, class)
        n_lapse = np.einsum("jkl,jkl->j", N, share)
        if prior is None:
            new_g = np.where(n_j > 0, n_lapse / np.where(n_j > 0, n_j, 1.0), g)
        else:
            new_g = (n_lapse + a1 - 1.0) / (n_j + a1 + a2 - 2.0)
        g = np.clip(new_g, 0.0, 1.0 - 1e-9)
        b, u = m_step_raters(b, u, N * (1.0 - share), prior)
    return b, u, g


# ------------------------------------------------------------------ the family


def _positive(name: str, value: Any, default: float) -> float:
    if value is None:
        return float(default)
    arr = numeric_array(name, value, [(), (1,)], "() (a scalar)").reshape(())
    if not arr > 0:
        raise ValueError(f"{name} must be > 0; got {float(arr)!r}")
    return float(arr)


def _lapse_prior(value: Any) -> np.ndarray:
    """The Beta prior (a, b) of the lapse probabilities, both >= 1 (a posterior mode exists)."""
    if value is None:
        return np.array(DEFAULT_LAPSE_PRIOR)
    arr = numeric_array("lapse_prior", value, [(2,)], "(2,): the (a, b) of a Beta prior")
    if np.any(~(arr >= 1.0)) or np.any(~np.isfinite(arr)):
        raise ValueError(
            f"lapse_prior must hold two finite numbers >= 1 (a Beta prior with a mode); got {arr.tolist()!r}"
        )
    return arr.astype(float)


def _finite(name: str, value: Any, default: float) -> float:
    if value is None:
        return float(default)
    return float(numeric_array(name, value, [(), (1,)], "() (a scalar)").reshape(()))


@register
@dataclass(frozen=True)
class Ordinal(ModelFamily):
    """Ordinal raters: an ordered-logit error matrix per rater, with its own shift and scale.

    For ordered categories ``0 < 1 < ... < K-1`` (the order of the data's
    categories; K >= 3), class ``k`` sits at ``k`` on a latent scale cut at
    the midpoints ``l - 1/2``, and

    ``P(rating <= l | class k, rater j) = logistic((l + 1/2 - k - b_j) / sigma_j)``,

    ``b_j ~ Normal(0, shift_sd)``, ``log sigma_j ~ Normal(log_scale_mean,
    log_scale_sd)``, ``pi ~ Dirichlet(alpha)``.  ``b_j > 0``: rater ``j``
    rates high; a small ``sigma_j``: a precise rater.  Two parameters per
    rater, whatever K; near misses are likelier than far ones.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 per class).
    shift_sd : float, optional
        Prior sd of the shifts, in class widths (default 1).
    log_scale_mean, log_scale_sd : float, optional
        Normal prior on ``log sigma_j`` (default -1 and 1: ``sigma`` about
        0.37, which puts 0.58 on the right rating of an inner class, rater's
        default accuracy 0.6).
    lapse : bool
        Raters lapse: with probability ``g_j`` rater ``j`` gives a rating at
        random, ``theta[j] = (1 - g_j) ordinal[j] + g_j / K``, so that far misses
        cost little (see the module notes).  Default False.
    lapse_prior : (a, b), optional
        Beta prior on each ``g_j`` when ``lapse`` (default (2, 20): mean 0.09,
        mode 0.05; both must be >= 1 for the posterior mode EM finds).

    Notes
    -----
    The class locations (``k``) and cutpoints (midpoints) are fixed: they fix
    the origin and unit of the latent scale, so every rater's shift and
    scale are identified, and the posterior mode is finite (proper Normal
    priors on ``b_j`` and ``log sigma_j``).  Categories of unequal width are
    not modelled (common learned cutpoints would add them).  The model reads
    the categories in the data's order (``RatingData.categories``); a scale
    whose labels do not sort in its order needs ``categories=`` in that order.
    K = 2 is refused: two parameters per rater is then the class-conditional
    model reparametrised.  Graded response raters (Samejima 1969), rater
    bias in ordinal models (Johnson & Albert 1999), latent class marginal
    as in Dawid & Skene (1979).  Fitted by NUTS, optimisation, Pathfinder
    (``stan/ordinal.stan``) and EM; not by Gibbs (not conjugate).

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("ordinal", 200, 5, n_categories=4, raters_per_item=3, seed=1)
    >>> fit = pyrater.fit(sim.data, "ordinal", method="em")
    >>> fit.point_estimate("theta").shape
    (5, 4, 4)
    """

    alpha: Any = None
    shift_sd: Any = None
    log_scale_mean: Any = None
    log_scale_sd: Any = None
    lapse: bool = False
    lapse_prior: Any = None
    name: ClassVar[str] = "ordinal"
    title: ClassVar[str] = "Ordinal raters"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em")
    conjugate: ClassVar[str | None] = None
    k_params: ClassVar[tuple[str, ...]] = ("pi", "categories")

    def __post_init__(self) -> None:
        if not isinstance(self.lapse, (bool, np.bool_)):
            raise ValueError(f"lapse must be True or False; got {self.lapse!r}")
        if self.lapse_prior is not None and not self.lapse:
            raise ValueError("lapse_prior applies to raters who lapse: give lapse=True with it")

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved priors: ``alpha`` (K,), ``shift_sd``, ``log_scale_mean``, ``log_scale_sd`` (0-d arrays).

        With ``lapse``, also ``lapse_prior`` (2,), the Beta prior of the lapse probabilities.
        """
        _check_k(K)
        out = {
            "alpha": resolve_alpha(self.alpha, K),
            "shift_sd": np.array(_positive("shift_sd", self.shift_sd, DEFAULT_SHIFT_SD)),
            "log_scale_mean": np.array(_finite("log_scale_mean", self.log_scale_mean, DEFAULT_LOG_SCALE_MEAN)),
            "log_scale_sd": np.array(_positive("log_scale_sd", self.log_scale_sd, DEFAULT_LOG_SCALE_SD)),
        }
        if self.lapse:
            out["lapse_prior"] = _lapse_prior(self.lapse_prior)
        return out

    def check_data(self, data: Any) -> None:
        """The base checks, and a warning when the scale's order is only an alphabetical sort of text labels."""
        super().check_data(data)
        data.check_scale_order("the ordinal model")

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, Any]:
        """The prior entries of the Stan program's data block."""
        lapse = "lapse_prior" in priors
        return {
            **{k: v for k, v in super().stan_priors(priors, K, J).items() if k != "lapse_prior"},
            **{k: float(priors[k]) for k in ("shift_sd", "log_scale_mean", "log_scale_sd")},
            "has_lapse": int(lapse),
            "lapse_prior": np.asarray(priors["lapse_prior"], dtype=float) if lapse else np.ones(2),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Small shifts, scales about 0.3 (raters mostly right), lapses about 0.05."""
        init = {"shift": rng.uniform(-0.2, 0.2, size=J), "log_scale": np.log(0.3) + rng.uniform(-0.3, 0.3, size=J)}
        if self.lapse:
            init["lapse"] = rng.uniform(0.02, 0.08, size=J)
        return init

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters near a mode found by EM (the shifts and scales of its error matrices).

        With lapses the error matrices are not ordinal: the shifts and scales are then those of
        the least-squares fit of :func:`ordinal_parameters`, and each lapse starts at 0.05.
        """
        par = ordinal_parameters(theta)
        start = {"pi": interior(pi), "shift": par["shift"], "log_scale": np.log(par["scale"])}
        if self.lapse:
            start["lapse"] = np.full(theta.shape[0], LAPSE_START)
        return start

    # ---- EM hooks: the M-step of a family without a closed form (pyrater.inference.em)
    def em_start(self, K: int, J: int) -> np.ndarray:
        """EM's starting rater parameters ``[b (J,), log sigma (J,)]`` (zeros and the prior mean), then ``g (J,)``.

        The lapses ``g`` (0.05 each) only with ``lapse``.
        """
        x = [np.zeros(J), np.full(J, DEFAULT_LOG_SCALE_MEAN)]
        if self.lapse:
            x.append(np.full(J, LAPSE_START))
        return np.concatenate(x)

    def _split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        J = x.size // (3 if self.lapse else 2)
        return x[:J], x[J : 2 * J], (x[2 * J :] if self.lapse else None)

    def em_m_step(self, x: np.ndarray, N: np.ndarray, priors: dict | None) -> np.ndarray:
        """New rater parameters from the expected counts ``N`` (J, K, K), from ``x``.

        :func:`m_step_raters`, or :func:`m_step_lapse` for raters who lapse.
        """
        b, u, g = self._split(x)
        if g is None:
            b, u = m_step_raters(b, u, N, priors)
            return np.concatenate([b, u])
        b, u, g = m_step_lapse(b, u, g, N, priors)
        return np.concatenate([b, u, g])

    def em_theta(self, x: np.ndarray, K: int) -> np.ndarray:
        """Error matrices (J, K, K) of the rater parameters ``x``."""
        b, u, g = self._split(x)
        theta = ordinal_theta(b, np.exp(u), K)
        return theta if g is None else lapse_theta(theta, g)

    def em_params(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """``shift``, ``log_scale`` and (with ``lapse``) ``lapse`` at x, each (J,), as the Stan program names them."""
        b, u, g = self._split(x)
        out = {"shift": b, "log_scale": u}
        if g is not None:
            out["lapse"] = g
        return out

    def em_log_prior(self, x: np.ndarray, priors: dict) -> float:
        """Log prior density of the rater parameters ``x`` (every constant included)."""
        b, u, g = self._split(x)
        lp = float(
            np.sum(_log_normal(b, 0.0, float(priors["shift_sd"])))
            + np.sum(_log_normal(u, float(priors["log_scale_mean"]), float(priors["log_scale_sd"])))
        )
        if g is not None:
            a1, a2 = (float(v) for v in np.asarray(priors["lapse_prior"], dtype=float))
            lp += float(np.sum(xlogy(a1 - 1.0, g) + xlog1py(a2 - 1.0, -g) - betaln(a1, a2)))
        return lp


def simulate_ordinal(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    shift: Any = None,
    scale: Any = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    shift_sd: float | None = None,
    log_scale_mean: float | None = None,
    log_scale_sd: float | None = None,
    lapse: Any = None,
    lapse_prior: Any = None,
) -> Simulation:
    """Simulate from the ordinal rater model.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene` (K >= 3).
    shift : array (J,) or scalar, optional
        Rater shifts ``b_j``.  Default: ``Normal(0, shift_sd)`` draws.
    scale : array (J,) or scalar, optional
        Rater scales ``sigma_j > 0``.  Default: ``exp(Normal(log_scale_mean, log_scale_sd))``.
    shift_sd, log_scale_mean, log_scale_sd : float, optional
        Priors for drawing the shifts and scales (defaults of :class:`Ordinal`).
    lapse : array (J,) or scalar, optional
        Lapse probabilities ``g_j`` in ``[0, 1]``: ``theta[j] = (1 - g_j) ordinal[j] + g_j / K``.
    lapse_prior : (a, b), optional
        Draw the lapse probabilities from ``Beta(a, b)`` (when ``lapse`` is not given).
        Neither given: raters do not lapse.

    Returns
    -------
    Simulation
        ``params = {"shift": (J,), "scale": (J,)}``, and ``"lapse"`` (J,) when raters lapse;
        ``model="ordinal"``.

    Examples
    --------
    >>> from pyrater.models import simulate_ordinal
    >>> sim = simulate_ordinal(100, 4, n_categories=5, shift=0.0, scale=0.3, seed=0)
    >>> sim.theta.shape
    (4, 5, 5)
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _check_k(_infer_k(n_categories, {"pi": pi, "categories": categories}))
    _check_categories(categories, K)
    sd_b = _positive("shift_sd", shift_sd, DEFAULT_SHIFT_SD)
    m_u = _finite("log_scale_mean", log_scale_mean, DEFAULT_LOG_SCALE_MEAN)
    sd_u = _positive("log_scale_sd", log_scale_sd, DEFAULT_LOG_SCALE_SD)
    if shift is not None:
        shift = np.broadcast_to(numeric_array("shift", shift, [(J,), ()], f"(J,) = ({J},) or a scalar"), (J,)).copy()
    if scale is not None:
        scale = numeric_array("scale", scale, [(J,), ()], f"(J,) = ({J},) or a scalar")
        if np.any(scale <= 0):
            raise ValueError(f"scale must be > 0; got min {scale.min()!r}")
        scale = np.broadcast_to(scale, (J,)).copy()
    pi = _pi(rng, pi, K, alpha)
    if shift is None:
        shift = rng.normal(0.0, sd_b, size=J)
    if scale is None:
        scale = np.exp(rng.normal(m_u, sd_u, size=J))
    if lapse is not None:
        lapse = numeric_array("lapse", lapse, [(J,), ()], f"(J,) = ({J},) or a scalar")
        if np.any(~((lapse >= 0) & (lapse <= 1))):
            raise ValueError(f"lapse must hold probabilities in [0, 1]; got {lapse.tolist()!r}")
        lapse = np.broadcast_to(lapse, (J,)).astype(float)
    elif lapse_prior is not None:
        a1, a2 = _lapse_prior(lapse_prior)
        lapse = rng.beta(a1, a2, size=J)
    theta = ordinal_theta(shift, scale, K)
    params = {"shift": shift, "scale": scale}
    if lapse is not None:
        theta = lapse_theta(theta, lapse)
        params["lapse"] = lapse
    return _finish(rng, "ordinal", I, J, pi, theta, raters_per_item, repeats, params, categories)


Ordinal.simulator = staticmethod(simulate_ordinal)
