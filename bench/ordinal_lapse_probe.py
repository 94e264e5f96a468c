"""Probe, not shipped: the ordinal model with a per-rater lapse (guess) probability, EM MAP, on real graded data.

``theta[j] = (1 - g_j) * ordinal(b_j, sigma_j) + g_j / K``: with probability
``g_j`` rater ``j`` answers at random, so a far miss costs little (the 3PL
"guessing" idea of item response theory; MACE's spammer).  Priors of the probe:
``b ~ N(0, 1)``, ``log sigma ~ N(-1, 1)``, ``logit g ~ N(-3, 1.5)``,
``pi ~ Dirichlet(3)``.  EM from the ordinal model's EM fit; each M-step one
L-BFGS over all raters' ``(b, log sigma, logit g)`` with the exact gradient.
Accuracy on the gold items only (no K-fold).  See RESULTS_ordinal.md.

Usage::

    python bench/ordinal_lapse_probe.py zhou_web adult_content trec_relevance snow_emotion_numeric
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.optimize as so

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import pyrater  # noqa: E402
from pyrater.models.kernels import class_log_posterior  # noqa: E402

sys.path.insert(0, str(HERE))
from ordinal_cutpoints_probe import load  # noqa: E402
from ordinal_cutpoints_probe import objective as cutpoints_objective  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"


def objective(x: np.ndarray, N: np.ndarray, K: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Minus the expected complete-data log posterior of the raters, its gradient, and theta.

    The cutpoints probe's objective at the fixed midpoints ``l + 1/2`` (the same numbers, bit for bit).
    """
    return cutpoints_objective(x, N, np.arange(K - 1) + 0.5)


def _value_grad(x: np.ndarray, N: np.ndarray, K: int) -> tuple[float, np.ndarray]:
    value, grad, _ = objective(x, N, K)
    return value, grad


def fit_lapse(data: pyrater.RatingData, T: np.ndarray, iters: int = 200) -> tuple[np.ndarray, np.ndarray, float]:
    J, K = data.n_raters, data.n_categories
    x = np.concatenate([np.zeros(J), np.full(J, -1.0), np.full(J, -3.0)])
    bounds = [(None, None)] * J + [(-7.0, 5.0)] * J + [(-12.0, 12.0)] * J
    prev, ll = -np.inf, -np.inf
    for _ in range(iters):
        wT = T * data.weight[:, None]
        N = np.asarray(data.counts.T @ wT).reshape(J, K, K).transpose(0, 2, 1)
        nk = wT.sum(0) + 2.0
        pi = nk / nk.sum()
        x = so.minimize(_value_grad, x, args=(N, K), jac=True, method="L-BFGS-B", bounds=bounds).x
        theta = objective(x, N, K)[2]
        log_post, ll_units = class_log_posterior(data.counts, np.log(pi), np.log(theta))
        T = np.exp(log_post)
        ll = float(data.weight @ ll_units)
        if abs(ll - prev) < 1e-7 * abs(ll):
            break
        prev = ll
    return T, x, ll


def main(names: list[str]) -> int:
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found")
        return 0
    for name in names:
        data, gold, start = load(name)
        T, x, ll = fit_lapse(data, start.class_probs.copy())
        pos = {lab: i for i, lab in enumerate(data.unit_labels)}
        z = np.asarray(data.categories)[T.argmax(1)]
        acc = float((z[[pos[i] for i in gold["item"]]] == gold["truth"].to_numpy()).mean())
        lapse = 1 / (1 + np.exp(-x[2 * data.n_raters :]))
        print(
            f"{name}: ordinal+lapse accuracy {acc:.4f}; log-lik {ll:.1f} (ordinal {start.log_lik:.1f}); "
            f"median lapse {np.median(lapse):.3f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["zhou_web", "adult_content", "trec_relevance", "snow_emotion_numeric"]))
