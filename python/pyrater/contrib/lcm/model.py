"""Mean-field variational inference for a latent class model with a latent dependence graph.

Model (n subjects, K targets; the derivation of every update is in
``docs/lcm_derivation.md``)
---------------------------------------------------------------------------
* Subjects are cases (Y = 1) or controls (Y = 0).  Cases have latent states
  ``L_ik in {0, 1}``; controls have ``L = 0``.
* Bronze standard on everyone: ``P(M_ik = 1 | L) = gamma_k^L delta_k^(1-L)``
  (true- and false-positive rates).
* Silver standard on some cases and targets, perfectly specific:
  ``P(SS_ik = 1 | L = 1) = eta_k``, ``P(SS_ik = 1 | L = 0) = 0``.
* Among cases, an Ising prior with each edge counted once::

      p(L_i) = exp(sum_k theta_k L_ik + rho sum_{k<k'} D_kk' L_ik L_ik') / Z(theta, rho, D)

* Priors: ``gamma_k ~ Beta(a, b)``, ``delta_k ~ Beta``, ``eta_k ~ Beta``,
  ``theta_k ~ N(m, s^2)``, ``rho ~ N(m, s^2)``, ``D_kk' ~ Bernoulli(pi_d)``
  for k < k', ``pi_d ~ Beta``.

Variational family and updates
------------------------------
``Q = q(gamma, delta) q(eta) q(L) q(theta) q(rho) q(D) q(pi_d)``, fully
factorised.  Beta updates for gamma, delta, eta and pi_d are exact
(conjugate); q(L_ik) is Bernoulli with the exact mean-field log-odds (the
log-partition Z does not depend on L).  q(theta_k), q(rho) and q(D_kk')
need ``E log Z``, which couples all 2^K states; it is replaced by the
pseudo-likelihood ``prod_k p(L_ik | L_i,-k)`` and the resulting expectations
``E log(1 + exp(theta_k + rho N_ik))`` by their second-order expansion,
then q(theta_k), q(rho) are Gaussian Laplace approximations.  Because of
these approximations the scheme is not ascent on one ELBO: it stops when the
largest change of the variational parameters falls below ``tol``.

Identifiability and known limitations
-------------------------------------
Controls identify delta.  Without silver-standard data, a case's positive
rate ``P(L = 1) gamma + (1 - P(L = 1)) delta`` identifies only a combination
of gamma and theta: their estimates then follow the priors while the
variational intervals stay narrow (see ``notebooks/lcm_graph.ipynb`` and
``test_without_silver_standard_gamma_and_theta_follow_the_prior``).
Mean field attenuates the dependence between targets (E[rho] about 1.4 for a
true 2.5 in ``bench/RESULTS_lcm.md``), which biases theta and gamma of
connected targets upwards; q(D) can settle in a local optimum (the sparse
start ``init_edge_prob = 0.1`` recovers the true graph in 18 of 20 reference
simulations); intervals are too narrow, as usual for mean field.

Example
-------
>>> from pyrater.contrib.lcm import LatentGraphLCM, simulate_lcm
>>> sim = simulate_lcm(n_cases=200, n_controls=200, K=4, seed=1)
>>> fit = LatentGraphLCM().fit(sim.M, sim.case, sim.silver)
>>> fit.summary().shape
(4, 16)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from ..._stacklevel import user_stacklevel
from . import kernels as kn
from .data import LCMData, as_lcm_data

__all__ = ["LCMPriors", "LCMParams", "LatentGraphLCM", "LCMResult", "DEFAULT_PROB"]

DEFAULT_PROB = 0.9


def _pos(name: str, value: float) -> float:
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"prior {name} must be finite and > 0; got {value!r}")
    return v


@dataclass(frozen=True)
class LCMPriors:
    """Prior hyperparameters (all scalars, shared by the K targets).

    Notes
    -----
    Defaults: ``gamma ~ Beta(2, 1)`` (a test is more often positive when the target is
    present: breaks the L <-> 1 - L symmetry), ``delta ~ Beta(1, 2)``,
    ``eta ~ Beta(1, 1)``, ``theta ~ N(0, 2^2)``, ``rho ~ N(0, 2^2)``,
    ``pi_d ~ Beta(1, 1)``.
    """

    gamma: tuple[float, float] = (2.0, 1.0)
    delta: tuple[float, float] = (1.0, 2.0)
    eta: tuple[float, float] = (1.0, 1.0)
    theta: tuple[float, float] = (0.0, 2.0)
    rho: tuple[float, float] = (0.0, 2.0)
    pi_d: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        for name in ("gamma", "delta", "eta", "pi_d"):
            a, b = getattr(self, name)
            object.__setattr__(self, name, (_pos(f"{name}[a]", a), _pos(f"{name}[b]", b)))
        for name in ("theta", "rho"):
            m, s = getattr(self, name)
            if not np.isfinite(float(m)):
                raise ValueError(f"prior {name} mean must be finite; got {m!r}")
            object.__setattr__(self, name, (float(m), _pos(f"{name} sd", s)))

    def __str__(self) -> str:
        return (
            f"gamma ~ Beta{self.gamma}, delta ~ Beta{self.delta}, eta ~ Beta{self.eta}, "
            f"theta ~ N(mean={self.theta[0]}, sd={self.theta[1]}), rho ~ N(mean={self.rho[0]}, sd={self.rho[1]}), "
            f"pi_d ~ Beta{self.pi_d}"
        )


def _vec(name: str, value: Any, K: int, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    arr = np.array(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(K, float(arr))
    if arr.shape != (K,):
        raise ValueError(f"{name} must be a scalar or have shape ({K},); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; got {arr}")
    if lo is not None and np.any((arr <= lo) | (arr >= hi)):
        raise ValueError(f"{name} must lie strictly between {lo} and {hi}; got {arr}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class LCMParams:
    """A point value of the model parameters (simulation truth, or fixed values for a fit).

    Attributes
    ----------
    gamma, delta, eta, theta : arrays (K,)
    rho : float
    D : array (K, K)
        Symmetric 0/1 (or [0, 1] weights) adjacency with zero diagonal.
    """

    gamma: np.ndarray
    delta: np.ndarray
    eta: np.ndarray
    theta: np.ndarray
    rho: float
    D: np.ndarray

    def __post_init__(self) -> None:
        D = np.array(self.D, dtype=float)
        if D.ndim != 2 or D.shape[0] != D.shape[1]:
            raise ValueError(f"D must be a square (K, K) matrix; got shape {D.shape}")
        K = D.shape[0]
        if not np.allclose(D, D.T) or np.any(np.diag(D) != 0) or np.any((D < 0) | (D > 1)):
            raise ValueError("D must be symmetric with zero diagonal and entries in [0, 1]")
        D.setflags(write=False)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "gamma", _vec("gamma", self.gamma, K, 0.0, 1.0))
        object.__setattr__(self, "delta", _vec("delta", self.delta, K, 0.0, 1.0))
        object.__setattr__(self, "eta", _vec("eta", self.eta, K, 0.0, 1.0))
        object.__setattr__(self, "theta", _vec("theta", self.theta, K))
        if not np.isfinite(float(self.rho)):
            raise ValueError(f"rho must be finite; got {self.rho!r}")
        object.__setattr__(self, "rho", float(self.rho))

    @property
    def K(self) -> int:
        """Number of classes."""
        return self.D.shape[0]


@dataclass(frozen=True, eq=False)
class LCMResult:
    """Result of :meth:`LatentGraphLCM.fit`.

    Beta posteriors are stored by their parameters, Gaussian ones by mean and
    variance; tables are keyed by the user's target and subject labels.

    Attributes
    ----------
    data : LCMData
    priors : LCMPriors
    graph : bool
        False for the model without the graph (rho = 0, no D).
    gamma_ab, delta_ab, eta_ab : arrays (K, 2)
        Beta parameters of q(gamma_k), q(delta_k), q(eta_k).
    theta_mean, theta_var : arrays (K,)
    rho_mean, rho_var : float
    edge_prob_array : array (K, K)
        E[D_kk'] (zeros without the graph).
    pi_ab : array (2,)
        Beta parameters of q(pi_d).
    q_array : array (n_cases, K)
        q(L_ik = 1) for the cases, in data order.
    trace : DataFrame
        One row per iteration: ``max_change`` (largest change of any
        variational parameter), ``max_change_q``, ``rho_mean``, ``seconds``.
    converged : bool
    n_iter : int
    fixed : bool
        True when the parameters were held at given values (only q(L) fitted).
    score : float
        ELBO-style objective at the end, with the pseudo-likelihood in place of
        the Ising density (:func:`pyrater.contrib.lcm.kernels.pseudo_elbo`); for
        information only, the updates are not exact ascent on it.
    """

    data: LCMData
    priors: LCMPriors
    graph: bool
    gamma_ab: np.ndarray
    delta_ab: np.ndarray
    eta_ab: np.ndarray
    theta_mean: np.ndarray
    theta_var: np.ndarray
    rho_mean: float
    rho_var: float
    edge_prob_array: np.ndarray
    pi_ab: np.ndarray
    q_array: np.ndarray
    trace: pd.DataFrame = field(repr=False)
    converged: bool = True
    n_iter: int = 0
    fixed: bool = False
    score: float = float("nan")

    def __repr__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        kind = "with graph" if self.graph else "without graph"
        return (
            f"LCMResult({kind}, {self.data.n_cases} cases, {self.data.n_controls} controls, "
            f"K={self.data.n_targets}, {state} after {self.n_iter} iterations)"
        )

    # -------------------------------------------------------------- tables
    @property
    def targets(self) -> pd.Index:
        """The target labels."""
        return self.data.targets

    @property
    def q_L(self) -> pd.DataFrame:
        """q(L_ik = 1), cases x targets, indexed by the user's subject labels."""
        return pd.DataFrame(self.q_array, index=self.data.case_labels, columns=self.targets)

    @property
    def edge_prob(self) -> pd.DataFrame:
        """E[D_kk'] under q, targets x targets."""
        t = self.targets
        return pd.DataFrame(self.edge_prob_array, index=t.rename("target"), columns=t.rename("target2"))

    def edges(self) -> pd.DataFrame:
        """Edge table (k < k'), sorted by decreasing edge probability."""
        K = len(self.targets)
        i, j = np.triu_indices(K, 1)
        df = pd.DataFrame(
            {"target": self.targets[i], "target2": self.targets[j], "edge_prob": self.edge_prob_array[i, j]}
        )
        return df.sort_values("edge_prob", ascending=False, kind="stable").reset_index(drop=True)

    def point_estimate(self) -> LCMParams:
        """Posterior means as an :class:`LCMParams` (rho = 0 and D = 0 without the graph)."""
        return LCMParams(
            gamma=self.gamma_ab[:, 0] / self.gamma_ab.sum(1),
            delta=self.delta_ab[:, 0] / self.delta_ab.sum(1),
            eta=self.eta_ab[:, 0] / self.eta_ab.sum(1),
            theta=self.theta_mean,
            rho=self.rho_mean,
            D=self.edge_prob_array,
        )

    def summary(self, prob: float = DEFAULT_PROB) -> pd.DataFrame:
        """Posterior mean and central ``prob`` interval of gamma, delta, eta, theta per target.

        Columns ``<param>_mean, <param>_sd, <param>_lo, <param>_hi`` for
        param in gamma, delta, eta, theta; rows are targets.  Intervals are
        quantiles of the variational posteriors (90% by default, as in rater).
        """
        if not 0 < prob < 1:
            raise ValueError(f"prob must lie in (0, 1); got {prob!r}")
        lo, hi = (1 - prob) / 2, (1 + prob) / 2
        cols: dict[str, np.ndarray] = {}
        for name in ("gamma", "delta", "eta"):
            ab = getattr(self, f"{name}_ab")
            dist = stats.beta(ab[:, 0], ab[:, 1])
            cols[f"{name}_mean"] = dist.mean()
            cols[f"{name}_sd"] = dist.std()
            cols[f"{name}_lo"] = dist.ppf(lo)
            cols[f"{name}_hi"] = dist.ppf(hi)
        sd = np.sqrt(self.theta_var)
        z = stats.norm.ppf(hi)
        cols["theta_mean"] = self.theta_mean
        cols["theta_sd"] = sd
        cols["theta_lo"] = self.theta_mean - z * sd
        cols["theta_hi"] = self.theta_mean + z * sd
        return pd.DataFrame(cols, index=self.targets)

    def rho_summary(self, prob: float = DEFAULT_PROB) -> pd.Series:
        """Posterior mean, sd and central ``prob`` interval of rho (all 0 without the graph)."""
        sd = float(np.sqrt(self.rho_var))
        z = stats.norm.ppf((1 + prob) / 2)
        return pd.Series(
            {"mean": self.rho_mean, "sd": sd, "lo": self.rho_mean - z * sd, "hi": self.rho_mean + z * sd}, name="rho"
        )

    # --------------------------------------------------------------- plots
    def plot_graph(self, ax=None, **kwargs):
        """Plot the estimated graph (see :func:`pyrater.contrib.lcm.plots.plot_graph`)."""
        from .plots import plot_graph

        return plot_graph(self, ax=ax, **kwargs)

    def plot_rates(self, ax=None, prob: float = DEFAULT_PROB, **kwargs):
        """Plot TPR and FPR per target with intervals (see :func:`pyrater.contrib.lcm.plots.plot_rates`)."""
        from .plots import plot_rates

        return plot_rates(self, ax=ax, prob=prob, **kwargs)


Variance = Literal["exact", "poisson"]


@dataclass(frozen=True)
class LatentGraphLCM:
    """Latent class model with a latent dependence graph, fitted by mean-field VB.

    Parameters
    ----------
    priors : LCMPriors, optional
        Hyperparameters (defaults documented on :class:`LCMPriors`).
    graph : bool, default True
        False fits the model without the graph (rho = 0, no D): K
        independent two-class latent class models sharing nothing.
    neighbour_variance : {"exact", "poisson"}, default "exact"
        Variance of the neighbour count ``N_ik = sum_k' D_kk' L_ik'`` used
        in the second-order expansions: its exact value under Q
        (``sum p (1 - p)``) or the Poisson approximation ``E N``.
    max_iter : int, default 500
    tol : float, default 1e-6
        Stop when the largest absolute change of q(L), of the posterior means
        of gamma, delta, eta, theta, rho and of E[D] is below ``tol``.
    init_edge_prob : float, default 0.1
        Starting E[D_kk'] for every pair.  A sparse start matters: the
        q(D) log-odds grow with the number of cases, so q(D) snaps to 0 or 1
        within a few iterations, and a dense start (0.5) lets weak
        correlations switch on edges that then reinforce themselves through
        the mean-field coupling of q(L) (a small shared rho spread over many
        edges).  Starting sparse makes rho large first, so that only strongly
        dependent pairs gain an edge.  See ``docs/lcm_derivation.md``.
    edge_every : int, default 10
        q(D) (the O(n K^2) step) is updated on every sweep while it still
        changes by more than ``tol``; once it is stable, only every
        ``edge_every`` sweeps.  Convergence is declared only on a sweep that
        updated q(D) too, so the fixed point is that of the full scheme.
        ``edge_every=1`` updates q(D) on every sweep.
    """

    priors: LCMPriors = field(default_factory=LCMPriors)
    graph: bool = True
    neighbour_variance: Variance = "exact"
    max_iter: int = 500
    tol: float = 1e-6
    init_edge_prob: float = 0.1
    edge_every: int = 10

    def __post_init__(self) -> None:
        if int(self.edge_every) < 1:
            raise ValueError(f"edge_every must be >= 1; got {self.edge_every!r}")
        if not 0 < float(self.init_edge_prob) < 1:
            raise ValueError(f"init_edge_prob must lie in (0, 1); got {self.init_edge_prob!r}")
        if not isinstance(self.priors, LCMPriors):
            raise TypeError(f"priors must be an LCMPriors; got {type(self.priors).__name__}")
        if self.neighbour_variance not in ("exact", "poisson"):
            raise ValueError(f"neighbour_variance must be 'exact' or 'poisson'; got {self.neighbour_variance!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1; got {self.max_iter!r}")
        if not float(self.tol) > 0:
            raise ValueError(f"tol must be > 0; got {self.tol!r}")

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        M: Any,
        case: Any,
        silver: Any = None,
        *,
        targets: Any = None,
        fixed: LCMParams | None = None,
        init_q: Any = None,
        seed: int | np.random.Generator | None = None,
        max_iter: int | None = None,
        tol: float | None = None,
    ) -> LCMResult:
        """Fit by coordinate ascent.

        Parameters
        ----------
        M, case, silver, targets
            See :func:`pyrater.contrib.lcm.as_lcm_data` (M is (n, K) 0/1, case (n,),
            silver (n, K) with NaN where not measured).
        fixed : LCMParams, optional
            Hold gamma, delta, eta, theta, rho and D at these values and fit
            only q(L) (the mean-field approximation of P(L | M, params)).
        init_q : array (n_cases, K), optional
            Starting q(L); by default 0.8 where M = 1 and 0.2 where M = 0
            (1 where the silver standard is positive).  With ``seed``, a
            random jitter is added (for restarts).
        seed : int or Generator, optional
        max_iter, tol : override the model's settings.

        Returns
        -------
        LCMResult
        """
        data = as_lcm_data(M, case, silver, targets=targets)
        max_iter = int(self.max_iter if max_iter is None else max_iter)
        tol = float(self.tol if tol is None else tol)
        K = data.n_targets
        if fixed is not None:
            if not isinstance(fixed, LCMParams):
                raise TypeError(f"fixed must be an LCMParams; got {type(fixed).__name__}")
            if fixed.K != K:
                raise ValueError(f"fixed parameters have K={fixed.K} targets but the data have {K}")
        c = data.case
        Mc = np.asarray(data.M[c], dtype=float)
        ss = data.silver[c]
        ss_meas = np.isfinite(ss)
        ss_pos = ss_meas & (np.nan_to_num(ss) == 1)
        ss_val = np.where(ss_meas, ss, 0.0)
        n1 = Mc.shape[0]
        if init_q is None:
            q = np.where(Mc == 1, 0.8, 0.2)
            if seed is not None:
                rng = np.random.default_rng(seed)
                q = np.clip(q + rng.uniform(-0.15, 0.15, size=q.shape), 0.01, 0.99)
        else:
            q = np.array(init_q, dtype=float)
            if q.shape != (n1, K) or not np.all((q >= 0) & (q <= 1)):
                raise ValueError(f"init_q must have shape ({n1}, {K}) with values in [0, 1]; got shape {q.shape}")
        q[ss_pos] = 1.0
        return _cavi(self, data, Mc, data.M[~c], ss_meas, ss_pos, ss_val, q, fixed, max_iter, tol)


def _cavi(model: LatentGraphLCM, data: LCMData, Mc, M0, ss_meas, ss_pos, ss_val, q, fixed, max_iter, tol) -> LCMResult:
    pr = model.priors
    K = data.n_targets
    graph = model.graph
    var_kind = model.neighbour_variance
    c1 = M0.sum(axis=0)
    c0 = M0.shape[0] - c1
    th_m0, th_sd = np.full(K, pr.theta[0]), np.full(K, pr.theta[1])
    if fixed is not None:
        g, dl, e = fixed.gamma, fixed.delta, fixed.eta
        elog = {"lg": np.log(g), "l1g": np.log1p(-g), "ld": np.log(dl), "l1d": np.log1p(-dl), "l1e": np.log1p(-e)}
        base = kn.bronze_logodds(Mc, ss_meas, ss_val, elog)
        m_t, v_t = fixed.theta.copy(), np.zeros(K)
        m_r, v_r = (fixed.rho, 0.0) if graph else (0.0, 0.0)
        d = fixed.D.copy() if graph else np.zeros((K, K))
        big = 1e6  # point masses stored as Beta(big m, big (1 - m))
        gab = np.column_stack([big * g, big * (1 - g)])
        dab = np.column_stack([big * dl, big * (1 - dl)])
        eab = np.column_stack([big * e, big * (1 - e)])
        pab = np.array(pr.pi_d)
    else:
        m_t, v_t = th_m0.copy(), th_sd**2
        m_r, v_r = (pr.rho[0], pr.rho[1] ** 2) if graph else (0.0, 0.0)
        d = np.full((K, K), model.init_edge_prob) if graph else np.zeros((K, K))
        np.fill_diagonal(d, 0.0)
        pab = np.array(pr.pi_d)
    rows = []
    t0 = time.perf_counter()
    converged = False
    it = 0
    prev = None
    force_d = False
    update_d = False
    d_moving = True
    for it in range(1, max_iter + 1):
        q_old = q.copy()
        if fixed is None:
            # conjugate Beta updates from expected counts
            gab = np.column_stack([pr.gamma[0] + (q * Mc).sum(0), pr.gamma[1] + (q * (1 - Mc)).sum(0)])
            dab = np.column_stack(
                [pr.delta[0] + ((1 - q) * Mc).sum(0) + c1, pr.delta[1] + ((1 - q) * (1 - Mc)).sum(0) + c0]
            )
            eab = np.column_stack(
                [pr.eta[0] + (ss_meas * q * ss_val).sum(0), pr.eta[1] + (ss_meas * q * (1 - ss_val)).sum(0)]
            )
            lg, l1g = kn.beta_elog(gab[:, 0], gab[:, 1])
            ld, l1d = kn.beta_elog(dab[:, 0], dab[:, 1])
            _, l1e = kn.beta_elog(eab[:, 0], eab[:, 1])
            base = kn.bronze_logodds(Mc, ss_meas, ss_val, {"lg": lg, "l1g": l1g, "ld": ld, "l1d": l1d, "l1e": l1e})
            # Gaussian Laplace updates of theta and rho; Bernoulli q(D); Beta q(pi_d)
            mu, s2 = kn.neighbour_moments(q, d, var_kind)
            m_t, v_t = kn.update_theta(q, mu, s2, m_r, v_r, m_t, th_m0, th_sd)
            if graph:
                m_r, v_r = kn.update_rho(q, mu, s2, m_t, v_t, m_r, pr.rho[0], pr.rho[1])
            update_d = graph and (d_moving or it % model.edge_every == 0 or force_d)
            if update_d:
                d_old = d
                la, lb = kn.beta_elog(pab[0], pab[1])
                d = expit(kn.edge_logodds(q, d, m_t, v_t, m_r, v_r, float(la - lb), var_kind))
                iu = np.triu_indices(K, 1)
                pab = np.array([pr.pi_d[0] + d[iu].sum(), pr.pi_d[1] + (1 - d[iu]).sum()])
                d_moving = bool(np.max(np.abs(d - d_old)) > tol)
        kn.update_q(q, base, m_t, m_r, d, ss_pos)
        means = np.concatenate(
            [gab[:, 0] / gab.sum(1), dab[:, 0] / dab.sum(1), eab[:, 0] / eab.sum(1), m_t, [m_r], d.ravel()]
        )
        dq = float(np.max(np.abs(q - q_old))) if q.size else 0.0
        dp = float(np.max(np.abs(means - prev))) if prev is not None else np.inf
        prev = means
        change = max(dq, dp) if fixed is None else dq
        rows.append((it, change, dq, m_r, time.perf_counter() - t0))
        if change < tol:
            if fixed is None and graph and not update_d:
                force_d = True  # converge only on a sweep that also updated q(D)
                continue
            converged = True
            break
        force_d = False
    score = kn.pseudo_elbo(
        q,
        Mc,
        np.asarray(M0, float),
        ss_meas,
        ss_val,
        {"gamma": gab, "delta": dab, "eta": eab},
        m_t,
        np.maximum(v_t, 1e-300),
        m_r,
        max(v_r, 1e-300),
        d,
        pab,
        pr,
        graph,
        var_kind,
    )
    trace = pd.DataFrame(rows, columns=["iteration", "max_change", "max_change_q", "rho_mean", "seconds"])
    if not converged:
        import warnings

        warnings.warn(
            f"LatentGraphLCM did not converge in {max_iter} iterations (last change {rows[-1][1]:.3g} > tol {tol:g}); "
            "increase max_iter or tol",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    frozen = {}
    for name, arr in (
        ("gamma_ab", gab),
        ("delta_ab", dab),
        ("eta_ab", eab),
        ("theta_mean", m_t),
        ("theta_var", v_t),
        ("edge_prob_array", d),
        ("pi_ab", pab),
        ("q_array", q),
    ):
        a = np.array(arr, dtype=float)
        a.setflags(write=False)
        frozen[name] = a
    return LCMResult(
        data=data,
        priors=pr,
        graph=graph,
        rho_mean=float(m_r),
        rho_var=float(v_r),
        trace=trace,
        converged=converged,
        n_iter=it,
        fixed=fixed is not None,
        score=score,
        **frozen,
    )
