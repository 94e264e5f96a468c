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
import pandas as pd
import scipy.optimize as so

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import pyrater  # noqa: E402
from pyrater.models.kernels import class_log_posterior  # noqa: E402
from pyrater.models.ordinal import _log_sigmoid, _log_theta_z, _z  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"


def objective(x: np.ndarray, N: np.ndarray, K: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Minus the expected complete-data log posterior of the raters, its gradient, and theta."""
    J = N.shape[0]
    b, u, gam = x[:J], x[J : 2 * J], x[2 * J :]
    s, g = np.exp(u), 1 / (1 + np.exp(-gam))
    z = _z(b, s, K)
    O = np.exp(_log_theta_z(z))
    with np.errstate(invalid="ignore", over="ignore"):
        logf = _log_sigmoid(z) + _log_sigmoid(-z)
    f = np.where(np.isfinite(z), np.exp(logf), 0.0)
    zf = np.where(np.isfinite(z), z, 0.0)
    dOb = -(f[..., 1:] - f[..., :-1]) / s[:, None, None]
    dOu = -zf[..., 1:] * f[..., 1:] + zf[..., :-1] * f[..., :-1]
    mix = (1 - g)[:, None, None] * O + (g / K)[:, None, None]
    r = N / mix
    val = float(np.sum(N * np.log(mix)))
    gb = np.einsum("jkl,jkl->j", r, dOb) * (1 - g) - b
    gu = np.einsum("jkl,jkl->j", r, dOu) * (1 - g) - (u + 1)
    gg = np.einsum("jkl,jkl->j", r, 1 / K - O) * g * (1 - g) - (gam + 3) / 1.5**2
    val += -0.5 * np.sum(b**2) - 0.5 * np.sum((u + 1) ** 2) - 0.5 * np.sum(((gam + 3) / 1.5) ** 2)
    return -val, -np.concatenate([gb, gu, gg]), mix


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
        ratings = pd.read_csv(SHARED / name / "ratings.csv")
        gold = pd.read_csv(SHARED / name / "gold.csv")
        if name == "snow_emotion_numeric":  # the bins of realdata_ordinal.py
            ratings["rating"] = np.digitize(ratings["rating"], [-60, -20, 20, 60]) + 1
            gold["truth"] = np.digitize(gold["truth"], [-60, -20, 20, 60]) + 1
        data = pyrater.RatingData.from_long(ratings)
        start = pyrater.em(data, "ordinal", method="map", progress=False, seed=1)
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
