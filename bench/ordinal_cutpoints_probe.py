"""Probe, not shipped: the ordinal model with lapses and common learned cutpoints, EM MAP, on real graded data.

The shipped ordinal model cuts the latent scale at the fixed midpoints
``l + 1/2`` between the class locations ``0 .. K-1``, so every category is one
class wide for every rater.  Here the K - 1 cutpoints are common to all raters
and learned: ``c = cumsum([0, exp(gamma)])``, centred on the midpoints' mean
(the shifts ``b_j`` keep their prior centre), ``gamma ~ N(0, 0.5)`` per gap
(``gamma = 0``: the midpoints).  Each rater lapses as in the lapse probe
(``theta[j] = (1 - g_j) ordinal[j] + g_j / K``).  Priors: ``b ~ N(0, 1)``,
``log sigma ~ N(-1, 1)``, ``logit g ~ N(-3, 1.5)``, ``pi ~ Dirichlet(3)``.

EM from the shipped ordinal model's EM fit; each M-step runs one L-BFGS over
all raters' ``(b, log sigma, logit g)`` with the exact gradient at the current
cutpoints, then Nelder-Mead over ``gamma`` (K - 2 numbers) at the new raters,
kept only where it raises the objective (a generalised EM step: monotone).
The same code with ``gamma`` held at 0 is the reference, so the two columns
differ by the cutpoints alone.  Accuracy on the gold items and the log
posterior (not K-fold).  See RESULTS_ordinal.md.

Usage::

    python bench/ordinal_cutpoints_probe.py adult_content zhou_web snow_emotion_numeric
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
from pyrater.models.ordinal import _log_sigmoid, _log_theta_z  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"
GAMMA_SD = 0.5


def cutpoints(gamma: np.ndarray, K: int) -> np.ndarray:
    """The K - 1 cutpoints of log-gaps ``gamma`` (K - 2,), centred on the mean of the midpoints ``l + 1/2``."""
    c = np.concatenate([[0.0], np.cumsum(np.exp(gamma))])
    return c - c.mean() + (K - 1) / 2.0


def standardised(b: np.ndarray, s: np.ndarray, c: np.ndarray, K: int) -> np.ndarray:
    """``z[j, k, m] = (c_m - k - b_j) / sigma_j`` with the ends ``-inf`` and ``+inf`` (J, K, K + 1)."""
    cuts = np.concatenate([[-np.inf], c, [np.inf]])
    k = np.arange(K, dtype=float)
    with np.errstate(invalid="ignore"):
        return (cuts[None, None, :] - k[None, :, None] - b[:, None, None]) / s[:, None, None]


def objective(x: np.ndarray, N: np.ndarray, c: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Minus the raters' expected complete-data log posterior at cutpoints ``c``, its gradient, and theta."""
    J, K = N.shape[0], N.shape[1]
    b, u, lg = x[:J], x[J : 2 * J], x[2 * J :]
    s, g = np.exp(u), 1 / (1 + np.exp(-lg))
    z = standardised(b, s, c, K)
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
    gg = np.einsum("jkl,jkl->j", r, 1 / K - O) * g * (1 - g) - (lg + 3) / 1.5**2
    val += -0.5 * np.sum(b**2) - 0.5 * np.sum((u + 1) ** 2) - 0.5 * np.sum(((lg + 3) / 1.5) ** 2)
    return -val, -np.concatenate([gb, gu, gg]), mix


def _value_grad(x: np.ndarray, N: np.ndarray, c: np.ndarray) -> tuple[float, np.ndarray]:
    value, grad, _ = objective(x, N, c)
    return value, grad


def _minus_gamma_objective(gamma: np.ndarray, x: np.ndarray, N: np.ndarray, K: int) -> float:
    return objective(x, N, cutpoints(gamma, K))[0] + 0.5 * float(np.sum((gamma / GAMMA_SD) ** 2))


def fit(data: pyrater.RatingData, T: np.ndarray, learn: bool, iters: int = 300) -> tuple[np.ndarray, np.ndarray, float]:
    """EM MAP from class probabilities ``T``; returns the final class probabilities, cutpoints and log posterior."""
    J, K = data.n_raters, data.n_categories
    x = np.concatenate([np.zeros(J), np.full(J, -1.0), np.full(J, -3.0)])
    gamma = np.zeros(K - 2)
    bounds = [(None, None)] * J + [(-7.0, 5.0)] * J + [(-12.0, 12.0)] * J
    prev = -np.inf
    for _ in range(iters):
        wT = T * data.weight[:, None]
        N = np.asarray(data.counts.T @ wT).reshape(J, K, K).transpose(0, 2, 1)
        nk = wT.sum(0) + 2.0
        pi = nk / nk.sum()
        c = cutpoints(gamma, K)
        x = so.minimize(_value_grad, x, args=(N, c), jac=True, method="L-BFGS-B", bounds=bounds).x
        if learn:
            now = _minus_gamma_objective(gamma, x, N, K)
            step = so.minimize(_minus_gamma_objective, gamma, args=(x, N, K), method="Nelder-Mead")
            if step.fun < now:
                gamma = step.x
        c = cutpoints(gamma, K)
        value, _, theta = objective(x, N, c)
        log_post, ll_units = class_log_posterior(data.counts, np.log(pi), np.log(theta))
        T = np.exp(log_post)
        # the log posterior at (pi, raters, cutpoints): log-likelihood + every log prior
        lp = (
            float(data.weight @ ll_units)
            + float(np.sum(2.0 * np.log(pi)))
            - 0.5 * float(np.sum((gamma / GAMMA_SD) ** 2))
        )
        lp += -value - float(np.sum(N * np.log(theta)))  # the raters' log priors (objective minus its likelihood part)
        if abs(lp - prev) < 1e-8 * abs(lp):
            break
        prev = lp
    return T, cutpoints(gamma, K), lp


def load(name: str) -> tuple[pyrater.RatingData, pd.DataFrame, pyrater.Fit]:
    """A graded gold set (snow_emotion_numeric binned as in realdata_ordinal.py), its gold and the shipped EM fit."""
    ratings = pd.read_csv(SHARED / name / "ratings.csv")
    gold = pd.read_csv(SHARED / name / "gold.csv")
    if name == "snow_emotion_numeric":
        ratings["rating"] = np.digitize(ratings["rating"], [-60, -20, 20, 60]) + 1
        gold["truth"] = np.digitize(gold["truth"], [-60, -20, 20, 60]) + 1
    data = pyrater.RatingData.from_long(ratings)
    return data, gold, pyrater.em(data, "ordinal", method="map", progress=False, seed=1)


def main(names: list[str]) -> int:
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found")
        return 0
    for name in names:
        data, gold, start = load(name)
        pos = {lab: i for i, lab in enumerate(data.unit_labels)}
        rows = [pos[i] for i in gold["item"]]
        out = []
        for learn in (False, True):
            T, c, lp = fit(data, start.class_probs.copy(), learn)
            acc = float((np.asarray(data.categories)[T[rows].argmax(1)] == gold["truth"].to_numpy()).mean())
            out.append(
                f"{'learned' if learn else 'midpoints'}: accuracy {acc:.4f}, log posterior {lp:.1f}, cuts {np.round(c, 2)}"
            )
        print(f"{name}: " + "; ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["adult_content", "zhou_web", "snow_emotion_numeric"]))
