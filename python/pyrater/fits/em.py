"""The result of EM (:func:`pyrater.em`): a mode fit with the run's record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.ratings import RatingData
from ..models import Model
from .mode import ModeFit

__all__ = ["EMFit"]


@dataclass(eq=False, repr=False)
class EMFit(ModeFit):
    """Result of :func:`pyrater.em`.

    Attributes
    ----------
    data : RatingData
    model : Model
    method : {"em_ml", "em_map"}
    pi : array, shape (K,)
        Estimated prevalence of each true class.
    theta : array, shape (J, K, K)
        Estimated error matrices, ``theta[j, k, l] = P(rater j says l | class k)``.
    class_probs : array, shape (I, K)
        ``P(z_i = k | y_i, pi, theta)`` at the estimate, one row per unit of
        ``data`` (item, or pattern for grouped data); one-hot for known items.
    log_lik : float
        Observed-data log-likelihood ``sum_i w_i log p(y_i)`` at the estimate
        (for items with a known class, ``log p(y_i, z_i)``).
    log_lik_trace : array, shape (n_iter,)
        The objective after each iteration: the log-likelihood for ML, the
        log-posterior ``log_lik + log p(pi, theta)`` (full prior densities,
        up to the constant ``-log p(y)``) for MAP.  EM never decreases it.
    n_iter : int
        Number of iterations (E-steps) of the kept run.
    converged : bool
        True when, before ``max_iter``, the objective changed by at most
        ``tol * max(1, |f|)`` AND the parameters settled: the largest
        absolute change of pi and theta, and the distance to the fixed
        point extrapolated from EM's rate, at most ``param_tol``, and then
        the class probabilities changed by at most ``param_tol`` (see
        :attr:`convergence`).
    convergence : dict
        How convergence was judged: ``rule`` (text), ``tol``, ``param_tol``,
        and at the last iteration ``objective_change`` (relative),
        ``param_change`` (max abs change of pi and theta),
        ``param_distance`` (its extrapolated distance to the fixed point)
        and ``class_change`` (max abs change of the class probabilities, NaN
        when not reached).
    start : str
        How the kept run started (``init``; for ``"search"`` which start won).
    log_posterior : float or None
        Final objective for MAP (``None`` for ML).
    objective : {"log_likelihood", "log_posterior"}
        What :attr:`log_lik_trace` holds.
    priors : dict or None
        Hyperparameters used for MAP (``None`` for ML).
    empty_rows : bool array, shape (J, K)
        Rows ``theta[j, k, :]`` with zero expected count and flat prior, set
        to uniform (see the module notes).
    restart_objectives : array, shape (1 + n_restarts,)
        Final objective of each run: the ``init`` run first, then the random
        restarts.  The kept run is the best.
    best_run : int
        Index of the kept run in :attr:`restart_objectives`.
    n_fitted_units : int
        Number of units EM iterated over (distinct count rows if compressed).
    compressed : bool
        True when long data was compressed into distinct count rows.
    timings : dict
        Seconds spent in ``setup`` (validation, count matrix, compression,
        loading numba when used) and, per run, in ``loop`` (initial class
        probabilities, the EM iterations and, for numba, loading the
        kernel).
    backend : {"numba", "scipy"}
        How the iterations were computed (see :func:`em`).
    known : int array, shape (I,), or None
        Known true class codes the fit conditioned on (-1 = unknown; None
        when ``known`` was not given, and for distributed fits).
    model_params : dict or None
        The model's own parameters at the estimate besides pi and theta (the
        pooled model's population rows ``m`` (K, K) and concentrations ``s``
        (K,); the community model's ``m`` (L, K, K), ``s`` (L, K), ``rho`` (L,)
        and ``community_prob`` (J, L), communities sorted by the mean diagonal
        of ``m``; the ordinal model's ``shift``, ``log_scale`` and, with lapses,
        ``lapse`` (J,) each; the one-coin model's accuracies ``p`` (J,), the
        class-conditional model's ``p`` (J, K); MACE's ``competence`` (J,) and
        spamming distributions ``xi`` (J, K)), named as in the family's Stan
        program; None for Dawid-Skene and the homogeneous model.  Also in
        :meth:`to_inference_data`.
    mode_scale : {"simplex", "log_odds"} or None
        MAP: the scale of the posterior mode (``pyrater.em`` ``mode_scale``):
        ``"log_odds"`` when some Dirichlet/Beta pseudo-count is below 1 (e.g.
        rater's default off-diagonal ``beta`` for K >= 5) or when asked for;
        ``summary()`` says so.  None for ML.
    """

    data: RatingData = field(repr=False)
    model: Model
    method: str
    pi: np.ndarray = field(repr=False)
    theta: np.ndarray = field(repr=False)
    class_probs: np.ndarray = field(repr=False)
    log_lik: float
    log_lik_trace: np.ndarray = field(repr=False)
    n_iter: int
    converged: bool
    log_posterior: float | None = None
    objective: str = "log_likelihood"
    priors: dict | None = field(default=None, repr=False)
    empty_rows: np.ndarray | None = field(default=None, repr=False)
    restart_objectives: np.ndarray | None = field(default=None, repr=False)
    best_run: int = 0
    n_fitted_units: int = 0
    compressed: bool = False
    timings: dict = field(default_factory=dict, repr=False)
    backend: str = "scipy"
    convergence: dict = field(default_factory=dict, repr=False)
    start: str = ""
    known: np.ndarray | None = field(default=None, repr=False)
    model_params: dict | None = field(default=None, repr=False)
    mode_scale: str | None = None

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        return self.pi, self.theta

    def _own_source(self) -> dict:
        return self.model_params or {}

    def _class_probs(self) -> np.ndarray:
        return self.class_probs

    def _groups(self) -> dict:
        groups = super()._groups()
        extra = getattr(self, "model_params", None)
        if extra:
            groups["posterior"] = groups["posterior"].merge(
                self._dataset({k: np.asarray(v)[None, None] for k, v in extra.items()})
            )
        return groups

    def _priors(self) -> dict[str, np.ndarray]:
        # ML uses no prior: show none rather than the model's unused defaults
        return dict(self.priors) if self.priors is not None else {}

    def _summary_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            # the algorithm's reference, true of every family (the model's own is in its docstring)
            "algorithm": "EM (Dempster, Laird & Rubin 1977), " + self._objective_name(),
            "iterations": self.n_iter,
            "converged": self.converged,
        }
        # getattr: fits saved before these fields existed load without them
        if getattr(self, "convergence", None):
            info["convergence rule"] = self.convergence.get("rule", "")
        if getattr(self, "start", ""):
            info["start"] = self.start
        info["log-likelihood"] = round(self.log_lik, 4)
        if self.log_posterior is not None:
            info["log-posterior (unnormalised)"] = round(self.log_posterior, 4)
        if self.restart_objectives is not None and self.restart_objectives.size > 1:
            info["runs (init + restarts)"] = int(self.restart_objectives.size)
            info["kept run"] = self.best_run
        info["units iterated"] = self.n_fitted_units
        info["backend"] = self.backend
        if self.empty_rows is not None and self.empty_rows.any():
            info["uninformed theta rows set uniform"] = int(self.empty_rows.sum())
        return info

    def _objective_name(self) -> str:
        if self.priors is None:
            return "maximum likelihood"
        if getattr(self, "mode_scale", None) == "log_odds":  # fits saved before the field existed lack it
            return "posterior mode on the log-odds scale (every Dirichlet/Beta pseudo-count + 1 on the simplex)"
        return "posterior mode"

    def __repr__(self) -> str:
        return (
            f"EMFit({self.model.title}, method={self.method!r}, n_iter={self.n_iter}, "
            f"converged={self.converged}, log_lik={self.log_lik:.6g}, K={self.pi.size}, J={self.theta.shape[0]})"
        )
