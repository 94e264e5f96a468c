"""The ordinal family's EM M-step compiled with numba: damped Newton per rater, exact gradient and Hessian.

Loaded when first used by :func:`pyrater.models.ordinal.m_step_raters` (which
falls back to its numpy version when numba cannot be imported).  For rater
``j`` with shift ``b``, ``u = log sigma`` and a standardised cut
``z = (c - k - b) / sigma`` (``F`` the logistic CDF, ``f = F (1 - F)``,
``f' = f (1 - 2F)``):

    dF/db = -f / sigma,          dF/du = -z f,
    d2F/db2 = f' / sigma^2,      d2F/db du = (z f' + f) / sigma,      d2F/du2 = z f + z^2 f',

and ``theta = F(a) - F(c)`` for the upper and lower cut of a rating, so
``log theta`` has gradient ``dtheta / theta`` and Hessian
``d2theta / theta - dtheta dtheta' / theta^2``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["newton_raters"]


@numba.njit(inline="always", cache=True)
def _sig(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@numba.njit(cache=True, nogil=True)
def _rater(N, b, u, has_prior, sd_b, m_u, sd_u, out):
    """Objective, gradient (2) and Hessian (3: bb, bu, uu) of one rater, written into ``out`` (6,)."""
    K = N.shape[0]
    s = math.exp(u)
    f_tot = 0.0
    g0 = 0.0
    g1 = 0.0
    h00 = 0.0
    h01 = 0.0
    h11 = 0.0
    for k in range(K):
        for l in range(K):
            n = N[k, l]
            if n == 0.0:
                continue
            # upper cut a (l < K-1) and lower cut c (l > 0)
            up = l < K - 1
            lo = l > 0
            a = (l + 0.5 - k - b) / s
            c = (l - 0.5 - k - b) / s
            if up and lo:
                if a + c < 0:
                    th = _sig(a) - _sig(c)
                else:
                    th = _sig(-c) - _sig(-a)
            elif up:
                th = _sig(a)
            else:
                th = _sig(-c)
            if th < 1e-300:
                th = 1e-300
            f_tot += n * math.log(th)
            d0 = 0.0
            d1 = 0.0
            e00 = 0.0
            e01 = 0.0
            e11 = 0.0
            if up:
                F = _sig(a)
                f = F * _sig(-a)
                fp = f * (1.0 - 2.0 * F)
                d0 += -f / s
                d1 += -a * f
                e00 += fp / (s * s)
                e01 += (a * fp + f) / s
                e11 += a * f + a * a * fp
            if lo:
                F = _sig(c)
                f = F * _sig(-c)
                fp = f * (1.0 - 2.0 * F)
                d0 -= -f / s
                d1 -= -c * f
                e00 -= fp / (s * s)
                e01 -= (c * fp + f) / s
                e11 -= c * f + c * c * fp
            r0 = d0 / th
            r1 = d1 / th
            g0 += n * r0
            g1 += n * r1
            h00 += n * (e00 / th - r0 * r0)
            h01 += n * (e01 / th - r0 * r1)
            h11 += n * (e11 / th - r1 * r1)
    if has_prior:
        f_tot += -0.5 * (b / sd_b) ** 2 - math.log(sd_b) - 0.5 * math.log(2 * math.pi)
        f_tot += -0.5 * ((u - m_u) / sd_u) ** 2 - math.log(sd_u) - 0.5 * math.log(2 * math.pi)
        g0 -= b / (sd_b * sd_b)
        g1 -= (u - m_u) / (sd_u * sd_u)
        h00 -= 1.0 / (sd_b * sd_b)
        h11 -= 1.0 / (sd_u * sd_u)
    out[0] = f_tot
    out[1] = g0
    out[2] = g1
    out[3] = h00
    out[4] = h01
    out[5] = h11


@numba.njit(cache=True, nogil=True)
def newton_raters(N, b, u, has_prior, sd_b, m_u, sd_u, lo, hi, max_iter, tol):
    """Damped Newton per rater on ``(b[j], u[j])`` in place; returns the number of raters that hit ``max_iter``."""
    J = N.shape[0]
    cur = np.empty(6)
    new = np.empty(6)
    unfinished = 0
    for j in range(J):
        bj = b[j]
        uj = min(max(u[j], lo), hi)
        _rater(N[j], bj, uj, has_prior, sd_b, m_u, sd_u, cur)
        done = False
        for _ in range(max_iter):
            h00, h01, h11 = cur[3], cur[4], cur[5]
            # shift the Hessian to be negative definite (its largest eigenvalue below -1e-6 * scale)
            tr = 0.5 * (h00 + h11)
            disc = math.sqrt(max(0.0, 0.25 * (h00 - h11) ** 2 + h01 * h01))
            top = tr + disc
            mag = max(1.0, abs(h00), abs(h01), abs(h11))
            damp = max(0.0, top + 1e-6 * mag)
            h00 -= damp
            h11 -= damp
            det = h00 * h11 - h01 * h01
            s0 = -(h11 * cur[1] - h01 * cur[2]) / det
            s1 = -(-h01 * cur[1] + h00 * cur[2]) / det
            big = max(abs(s0), abs(s1))
            if big > 2.0:
                s0 *= 2.0 / big
                s1 *= 2.0 / big
            t = 1.0
            ok = False
            for _ls in range(40):
                nb = bj + t * s0
                nu = min(max(uj + t * s1, lo), hi)
                _rater(N[j], nb, nu, has_prior, sd_b, m_u, sd_u, new)
                if new[0] >= cur[0] - 1e-12 * max(1.0, abs(cur[0])):
                    ok = True
                    break
                t *= 0.5
            if not ok:
                done = True
                break
            moved = max(abs(nb - bj), abs(nu - uj))
            bj, uj = nb, nu
            for i in range(6):
                cur[i] = new[i]
            if moved <= tol:
                done = True
                break
        if not done:
            unfinished += 1
        b[j] = bj
        u[j] = uj
    return unfinished
