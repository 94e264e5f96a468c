"""The fused numba EM iteration (pyrater.inference.em.kernel) against the scipy path of pyrater.inference.em.algorithm."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

pytest.importorskip("numba")

from conftest import shared_file
from pyrater.data import RatingData
from pyrater.inference import _numba
from pyrater.inference.em import kernel as _fused
from pyrater.inference.em.algorithm import EMConvergenceWarning, em
from pyrater.models import simulate_dawid_skene
from pyrater.models._fused import class_probs_row, exp_nonpos, finish_row
from pyrater.models.kernels import (
    class_log_posterior,
    soft_majority_vote,
)

VARIANTS = ["dawid_skene", "class_conditional", "homogeneous", "one_coin", "mace"]
RTOL = 1e-10


def _with_repeats(data: RatingData, share: float, seed: int) -> RatingData:
    """The same ratings plus a repeat of a random share of them (count-2 entries)."""
    rng = np.random.default_rng(seed)
    extra = rng.random(data.n_ratings) < share
    return RatingData.from_codes(
        np.concatenate([data.unit, data.unit[extra]]),
        np.concatenate([data.rater, data.rater[extra]]),
        np.concatenate([data.rating, data.rating[extra]]),
        n_categories=data.n_categories,
        n_items=data.n_units,
    )


@pytest.fixture(scope="module")
def repeated() -> tuple[RatingData, dict]:
    sim = simulate_dawid_skene(600, 12, n_categories=4, raters_per_item=4, seed=7)
    data = _with_repeats(sim.data, 0.15, seed=1)
    known = {lab: data.categories[z] for lab, z in zip(data.unit_labels[:60], sim.z[:60])}
    return data, known


def _fit(data, backend, **kw):
    # plain EM: the backends are compared iteration by iteration to 1e-10, and SQUAREM's jumps multiply
    # rounding differences by the squared step length (its own comparison: test_squarem_on_both_backends)
    kw.setdefault("acceleration", "none")
    kw.setdefault("method", "ml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        return em(data, backend=backend, **kw)


def _assert_same_fit(a, b, rtol=RTOL):
    assert a.backend == "scipy" and b.backend == "numba"
    assert a.n_iter == b.n_iter and a.converged == b.converged
    np.testing.assert_allclose(b.pi, a.pi, rtol=rtol, atol=1e-14)
    np.testing.assert_allclose(b.theta, a.theta, rtol=rtol, atol=1e-14)
    np.testing.assert_allclose(b.class_probs, a.class_probs, rtol=rtol, atol=1e-14)
    np.testing.assert_allclose(b.log_lik_trace, a.log_lik_trace, rtol=rtol)
    assert b.log_lik == pytest.approx(a.log_lik, rel=rtol)
    np.testing.assert_array_equal(b.empty_rows, a.empty_rows)


# ------------------------------------------------------------------ whole fits


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("method", ["ml", "map"])
@pytest.mark.parametrize("with_known", [False, True])
def test_fused_fit_equals_scipy_fit(repeated, variant, method, with_known):
    data, known = repeated
    assert data.counts.data.max() >= 2  # repeated ratings are in the data
    kw = dict(model=variant, method=method, known=known if with_known else None, tol=0.0, max_iter=25, compress=False)
    a, b = _fit(data, "scipy", **kw), _fit(data, "numba", **kw)
    _assert_same_fit(a, b)
    if with_known:  # clamped to one-hot on the known class
        codes = data.known_codes(known)
        rows = np.flatnonzero(codes >= 0)
        np.testing.assert_array_equal(b.class_probs[rows, codes[rows]], 1.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_fit_equals_scipy_fit_until_convergence(repeated, variant):
    data, known = repeated
    a = _fit(data, "scipy", model=variant, known=known, tol=1e-9)
    b = _fit(data, "numba", model=variant, known=known, tol=1e-9)
    assert a.converged
    _assert_same_fit(a, b)


@pytest.mark.parametrize("variant", ["dawid_skene", "class_conditional", "homogeneous", "one_coin"])
def test_squarem_on_both_backends_reaches_the_same_estimate(repeated, variant):
    data, known = repeated
    kw = dict(model=variant, known=known, tol=1e-12, param_tol=1e-8, acceleration="squarem")
    a, b = _fit(data, "scipy", **kw), _fit(data, "numba", **kw)
    assert a.converged and b.converged and b.backend == "numba"
    assert b.convergence["squarem_cycles"] > 0 and a.convergence["squarem_cycles"] > 0
    assert b.log_lik == pytest.approx(a.log_lik, abs=1e-7)
    np.testing.assert_allclose(b.theta, a.theta, atol=1e-6)
    np.testing.assert_allclose(b.class_probs, a.class_probs, atol=1e-6)
    trace = b.log_lik_trace
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))


@pytest.mark.parametrize("method", ["ml", "map"])
def test_fused_fit_with_grouped_weights(method):
    data = RatingData.from_grouped(pd.read_csv(shared_file("caries.csv")))
    assert data.is_grouped and data.weight.max() > 1
    for model in VARIANTS:
        a = _fit(data, "scipy", model=model, method=method, tol=0.0, max_iter=25)
        b = _fit(data, "numba", model=model, method=method, tol=0.0, max_iter=25)
        _assert_same_fit(a, b)


def test_fused_fit_with_compressed_weights_and_known_items():
    # few raters: many items share a count row, so compression leaves weights > 1
    sim = simulate_dawid_skene(3000, 3, pi=[0.5, 0.3, 0.2], theta=np.array([np.eye(3) * 0.6 + 0.4 / 3] * 3), seed=9)
    known = {lab: sim.data.categories[z] for lab, z in zip(sim.data.unit_labels[:30], sim.z[:30])}
    for method in ("ml", "map"):
        a = _fit(sim.data, "scipy", method=method, known=known, compress=True, tol=0.0, max_iter=25)
        b = _fit(sim.data, "numba", method=method, known=known, compress=True, tol=0.0, max_iter=25)
        assert b.compressed and b.n_fitted_units < 3000
        _assert_same_fit(a, b)


@pytest.mark.parametrize("K", [2, 8])
def test_fused_fit_at_the_smallest_and_largest_K(K):
    sim = simulate_dawid_skene(800, 10, n_categories=K, raters_per_item=3, seed=K)
    a = _fit(sim.data, "scipy", tol=0.0, max_iter=40)
    b = _fit(sim.data, "numba", tol=0.0, max_iter=40)
    _assert_same_fit(a, b)


def test_random_restarts_and_user_init_agree(repeated):
    data, _ = repeated
    init = np.random.default_rng(4).dirichlet(np.ones(4), size=data.n_units)
    before = init.copy()
    a = _fit(data, "scipy", init=init, n_restarts=2, seed=3, tol=1e-8)
    b = _fit(data, "numba", init=init, n_restarts=2, seed=3, tol=1e-8)
    np.testing.assert_array_equal(init, before)  # the user's array is not modified
    _assert_same_fit(a, b)
    np.testing.assert_allclose(b.restart_objectives, a.restart_objectives, rtol=RTOL)
    assert a.best_run == b.best_run


def test_threads_give_the_same_fit(repeated):
    data, known = repeated
    one = _fit(data, "numba", known=known, tol=0.0, max_iter=40)
    two = _fit(data, "numba", known=known, tol=0.0, max_iter=40, n_threads=2)
    np.testing.assert_allclose(two.theta, one.theta, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(two.class_probs, one.class_probs, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(two.log_lik_trace, one.log_lik_trace, rtol=1e-13)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("method", ["ml", "map"])
def test_fused_trace_never_decreases(repeated, variant, method):
    data, known = repeated
    fit = _fit(
        data,
        "numba",
        model=variant,
        method=method,
        known=known,
        init="random",
        seed=1,
        tol=1e-13,
        max_iter=3000,
        compress=False,
    )
    trace = fit.log_lik_trace
    assert fit.backend == "numba" and trace.size > 5
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    assert trace[-1] > trace[0]


def test_the_data_is_not_modified(repeated):
    data, known = repeated
    c = data.counts
    before = (c.indptr.copy(), c.indices.copy(), c.data.copy())
    _fit(data, "numba", known=known, max_iter=20)
    for x, y in zip(before, (c.indptr, c.indices, c.data)):
        np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------- backend choice


def test_auto_backend_uses_numba_from_the_size_threshold(repeated, monkeypatch):
    import importlib

    em_module = importlib.import_module(
        "pyrater.inference.em.algorithm"
    )  # the package exports the function under the same name
    data, _ = repeated
    assert _fit(data, "auto", max_iter=5).backend == "scipy"  # far below the threshold
    monkeypatch.setattr(em_module, "_FUSED_MIN_NNZ", 0)
    assert _fit(data, "auto", max_iter=5).backend == "numba"
    assert _fit(data, "scipy", max_iter=5).backend == "scipy"
    many = simulate_dawid_skene(200, 5, n_categories=9, raters_per_item=3, seed=0)
    assert _fit(many.data, "auto", max_iter=5).backend == "scipy"  # K > 8: no fused kernel
    with pytest.raises(ValueError, match="supports 2 to 8 categories"):
        _fit(many.data, "numba", max_iter=5)


def test_without_numba_auto_falls_back_to_scipy(repeated, monkeypatch):
    import importlib

    em_module = importlib.import_module("pyrater.inference.em.algorithm")
    monkeypatch.setattr(em_module, "_FUSED_MIN_NNZ", 0)
    monkeypatch.setattr(em_module, "load_fused", lambda: None)  # as if numba failed to import
    data, _ = repeated
    assert _fit(data, "auto", max_iter=5).backend == "scipy"
    with pytest.raises(ImportError, match="needs numba"):
        _fit(data, "numba", max_iter=5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"backend": "cuda"}, "backend must be"),
        ({"n_threads": 0}, "n_threads must be"),
        ({"n_threads": 1.5}, "n_threads must be"),
    ],
)
def test_bad_backend_arguments(repeated, kwargs, match):
    with pytest.raises(ValueError, match=match):
        em(repeated[0], **kwargs)


# ------------------------------------------------------------------- kernels


def test_kernel_pass_equals_the_reference_products(repeated):
    data, known = repeated
    c = data.counts
    I, JK = c.shape
    K, J = data.n_categories, data.n_raters
    rng = np.random.default_rng(5)
    pi = rng.dirichlet(np.ones(K))
    theta = rng.dirichlet(np.ones(K), size=(J, K))
    codes = data.known_codes(known)
    w = rng.integers(1, 4, size=I).astype(float)
    LT = _fused.pad_log_theta(np.log(theta), _numba.aligned_zeros((JK, _fused.KP)))
    assert LT.ctypes.data % 64 == 0 and np.all(LT[:, K:] == 0)
    T = np.full((I, K), np.nan)
    ll = np.full(I, np.nan)
    N = _numba.aligned_zeros((JK, _fused.KP))
    n_k = np.full(_fused.KP, np.nan)
    args = (c.indptr, c.indices, c.data, LT, _fused.pad_log_pi(np.log(pi)), codes, w, 0, I, K, T, ll, N, n_k)
    _numba.compile_for(_fused.em_iteration, *args)
    total = _fused.em_iteration(*args)
    lp, ll_ref = class_log_posterior(c, np.log(pi), np.log(theta), codes)
    T_ref = np.exp(lp)
    np.testing.assert_allclose(T, T_ref, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(ll, ll_ref, rtol=1e-13)
    assert total == pytest.approx(float(w @ ll_ref), rel=1e-13)
    np.testing.assert_allclose(N[:, :K], c.T @ (w[:, None] * T_ref), rtol=1e-12, atol=1e-300)
    assert np.all(N[:, K:] == 0)
    np.testing.assert_allclose(n_k[:K], w @ T_ref, rtol=1e-12)
    # a range of units, unit weights, no per-unit outputs: same pieces, product-of-sums objective
    lo, hi = 100, 400
    part = _fused.em_iteration(
        c.indptr,
        c.indices,
        c.data,
        LT,
        _fused.pad_log_pi(np.log(pi)),
        codes,
        np.empty(0),
        lo,
        hi,
        K,
        np.empty((0, K)),
        np.empty(0),
        N,
        n_k,
    )
    assert part == pytest.approx(ll_ref[lo:hi].sum(), rel=1e-13)
    np.testing.assert_allclose(N[:, :K], c[lo:hi].T @ T_ref[lo:hi], rtol=1e-12, atol=1e-300)
    # the first M-step's sums from given probabilities
    args = (c.indptr, c.indices, c.data, T_ref, w, 0, I, N, n_k)
    _numba.compile_for(_fused.expected_counts, *args)
    _fused.expected_counts(*args)
    np.testing.assert_allclose(N[:, :K], c.T @ (w[:, None] * T_ref), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(n_k[:K], w @ T_ref, rtol=1e-12)


def test_the_unit_count_path_equals_the_reference_products(repeated):
    # an empty data array means "every stored count is 1": the pass of the 0/1 pattern of the counts
    data, known = repeated
    c = data.counts.copy()
    c.data[:] = 1.0
    I, JK = c.shape
    K, J = data.n_categories, data.n_raters
    rng = np.random.default_rng(8)
    pi = rng.dirichlet(np.ones(K))
    theta = rng.dirichlet(np.ones(K), size=(J, K))
    codes = data.known_codes(known)
    LT = _fused.pad_log_theta(np.log(theta), _numba.aligned_zeros((JK, _fused.KP)))
    T = np.full((I, K), np.nan)
    N = _numba.aligned_zeros((JK, _fused.KP))
    n_k = np.full(_fused.KP, np.nan)
    args = (c.indptr, c.indices, np.empty(0), LT, _fused.pad_log_pi(np.log(pi)), codes, np.empty(0), 0, I, K, T)
    args = (*args, np.empty(0), N, n_k)
    _numba.compile_for(_fused.em_iteration, *args)
    total = _fused.em_iteration(*args)
    lp, ll_ref = class_log_posterior(c, np.log(pi), np.log(theta), codes)
    T_ref = np.exp(lp)
    np.testing.assert_allclose(T, T_ref, rtol=1e-12, atol=1e-300)
    assert total == pytest.approx(ll_ref.sum(), rel=1e-13)
    np.testing.assert_allclose(N[:, :K], c.T @ T_ref, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(n_k[:K], T_ref.sum(0), rtol=1e-12)
    # and the same numbers, bit for bit, as the pass that reads the ones
    N2, n_k2, T2 = _numba.aligned_zeros((JK, _fused.KP)), np.empty(_fused.KP), np.empty((I, K))
    total2 = _fused.em_iteration(*args[:2], c.data, *args[3:10], T2, np.empty(0), N2, n_k2)
    assert total2 == total
    np.testing.assert_array_equal(T2, T)
    np.testing.assert_array_equal(N2, N)


@pytest.mark.parametrize("prior", [False, True])
def test_the_compiled_dawid_skene_m_step_equals_the_numpy_one(prior):
    from pyrater.inference.em.steps import MapPrior, m_step_from_counts

    J, K = 7, 4
    rng = np.random.default_rng(3)
    N = _numba.aligned_zeros((J * K, _fused.KP))
    N[:, :K] = rng.random((J * K, K)) * rng.integers(0, 3, size=(J * K, K))
    N[:K, :] = 0.0  # rater 0 without any expected count: its rows empty
    n_k = N[:, :K].sum(0)
    beta = 1.0 + rng.random((J, K, K)) * 3 if prior else None
    map_prior = MapPrior(kind="dawid_skene", alpha=np.full(K, 1.5), beta=beta) if prior else None
    pi_ref, theta_ref, empty_ref = m_step_from_counts(n_k, N[:, :K], J, K, "dawid_skene", map_prior)
    add = np.empty((0, _fused.KP))
    if prior:
        add = _numba.aligned_zeros((J * K, _fused.KP))
        add[:, :K] = (beta - 1.0).transpose(0, 2, 1).reshape(J * K, K)
    theta, empty = np.empty((J, K, K)), np.empty((J, K), dtype=bool)
    no_prev = np.empty((0, 0, 0))
    assert np.isnan(_numba.run(_fused.dawid_skene_theta, N, add, theta, empty, no_prev))  # no change without prev
    np.testing.assert_allclose(theta, theta_ref, rtol=1e-14, atol=1e-16)
    np.testing.assert_array_equal(empty, empty_ref)
    assert empty[0].all() != prior  # ML: rater 0's rows are empty (uniform); the prior fills them
    np.testing.assert_allclose(theta.sum(-1), 1.0, rtol=1e-14)
    # the stopping rule's change of theta, computed on the way: exactly numpy's max |theta - prev|
    prev = rng.dirichlet(np.ones(K), size=(J, K))
    change = _fused.dawid_skene_theta(N, add, theta, empty, prev)
    assert change == np.max(np.abs(theta - prev)) > 0
    assert _fused.dawid_skene_theta(N, add, theta, empty, theta.copy()) == 0.0
    prev[J - 1, 0, 0] = np.nan  # a NaN anywhere gives NaN, as np.max does
    assert np.isnan(_fused.dawid_skene_theta(N, add, theta, empty, prev))


def test_the_compiled_m_step_takes_a_row_whose_total_is_subnormal_as_numpy_does():
    # maximum likelihood: rater 1's items are almost surely of class 0, so its class-1 row holds a
    # subnormal expected count; its reciprocal overflows (0 * inf was NaN, and EM then failed)
    from pyrater.inference.em.steps import m_step_from_counts

    J, K = 2, 3
    N = _numba.aligned_zeros((J * K, _fused.KP))
    N[:K, :K] = [[5.0, 1.0, 0.5], [1.0, 4.0, 0.5], [0.0, 1.0, 3.0]]
    N[K:, 0] = [6.0, 2.0, 1.0]
    N[K, 1] = 5e-324  # the smallest subnormal: rater 1, rating 0, class 1; ratings 1 and 2 add exactly 0
    n_k = N[:, :K].sum(0)
    pi_ref, theta_ref, empty_ref = m_step_from_counts(n_k, N[:, :K], J, K, "dawid_skene", None)
    theta, empty = np.empty((J, K, K)), np.empty((J, K), dtype=bool)
    _numba.run(_fused.dawid_skene_theta, N, np.empty((0, _fused.KP)), theta, empty, np.empty((0, 0, 0)))
    assert np.isfinite(theta).all()
    np.testing.assert_array_equal(theta[1, 1], [1.0, 0.0, 0.0])  # all of that row's (tiny) count on rating 0
    np.testing.assert_allclose(theta, theta_ref, rtol=1e-14, atol=0)
    np.testing.assert_array_equal(empty, empty_ref)


def test_kernel_rows_without_a_finite_log_joint_are_nan_like_the_scipy_path():
    # rater 0 never says 1 under either class, but unit 0 has that rating
    data = RatingData.from_codes(np.array([0, 1, 1]), np.array([0, 0, 1]), np.array([1, 0, 0]), n_categories=2)
    c = data.counts
    theta = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]])
    LT = np.zeros((4, _fused.KP))
    with np.errstate(divide="ignore"):
        _fused.pad_log_theta(np.log(theta), LT)
    T = np.empty((2, 2))
    ll = np.empty(2)
    args = (
        c.indptr,
        c.indices,
        c.data,
        LT,
        _fused.pad_log_pi(np.log([0.5, 0.5])),
        np.empty(0, np.int64),
        np.empty(0),
        0,
        2,
        2,
        T,
        ll,
        np.empty((0, _fused.KP)),
        np.zeros(_fused.KP),
    )
    _numba.compile_for(_fused.em_iteration, *args)
    _fused.em_iteration(*args)
    assert np.all(np.isnan(T[0])) and np.isnan(ll[0])
    np.testing.assert_allclose(T[1], [0.5, 0.5], rtol=1e-15)
    assert ll[1] == pytest.approx(np.log(0.5 * 1.0 * 0.5 + 0.5 * 1.0 * 0.5), rel=1e-15)


def test_polynomial_exp_matches_libm():
    rng = np.random.default_rng(0)
    xs = np.concatenate(
        [
            -rng.exponential(5.0, 4000),
            -rng.uniform(0, 745.2, 4000),
            [0.0, -1e-300, -0.5 * math.log(2), -700.0, -708.39, -708.4, -720.0, -744.4, -745.1],
        ]
    )
    for x in xs:
        got, ref = exp_nonpos(x), math.exp(x)
        if ref >= 2.2250738585072014e-308:  # normal results: within about 2 ulp
            assert got == pytest.approx(ref, rel=5e-16, abs=0.0), x
        else:  # subnormal results: the same up to their coarser spacing
            assert abs(got - ref) <= 2 * 5e-324, x
    assert exp_nonpos(-745.3) == 0.0 and exp_nonpos(-np.inf) == 0.0
    assert exp_nonpos(0.0) == 1.0


def test_per_unit_helpers_take_scalars_and_match_numpy():
    """The per-unit steps of the fused passes on eight scalar lanes (no arrays: see models/_fused.py)."""
    rng = np.random.default_rng(3)
    for kk in (-1, 0, 4, 7):
        a = rng.normal(0.0, 30.0, 8)
        a[6:] = -np.inf if kk < 6 else a[6:]  # padded lanes (K = 6) unless the known class is one of them
        m, *x = finish_row(kk, *a)
        want = a.copy()
        if kk >= 0:
            want[np.arange(8) != kk] = -np.inf
        assert m == want.max()
        np.testing.assert_array_equal(x, want - want.max())
        s, *t = class_probs_row(*x, m)
        p = np.exp(want - logsumexp(want))
        assert math.log(s) == pytest.approx(logsumexp(want) - m, rel=1e-14, abs=1e-14)
        np.testing.assert_allclose(t, p, rtol=1e-14, atol=1e-300)
    s, *t = class_probs_row(*np.zeros(8), -np.inf)  # no finite log joint: NaN, as the scipy path
    assert math.isnan(s)


def test_vote_shares_equal_soft_majority_vote(repeated):
    data, _ = repeated
    c = data.counts
    got = _numba.run(_fused.vote_shares, c.indptr, c.indices, c.data, np.empty((data.n_units, data.n_categories)))
    np.testing.assert_array_equal(got, soft_majority_vote(c, data.n_categories))


@pytest.mark.parametrize("weighted", [False, True])
def test_majority_sums_equal_the_vote_then_its_expected_counts(repeated, weighted):
    """One pass (the fused start) gives the bits of vote_shares, clamped to the known classes, then expected_counts;
    units without counts get 1/K."""
    data, _ = repeated
    c = data.counts.copy()
    c.data[c.indptr[3] : c.indptr[4]] = 0.0  # unit 3: no counts left (its vote is 1/K)
    I, K = data.n_units, data.n_categories
    JK = c.shape[1]
    rng = np.random.default_rng(4)
    known = np.where(rng.random(I) < 0.1, rng.integers(0, K, I), -1).astype(np.int64)
    weight = rng.integers(1, 4, I).astype(float) if weighted else np.empty(0)
    T = _numba.run(_fused.vote_shares, c.indptr, c.indices, c.data, np.empty((I, K)))
    rows = np.flatnonzero(known >= 0)
    T[rows] = 0.0
    T[rows, known[rows]] = 1.0
    N_ref, n_ref = np.zeros((JK, _fused.KP)), np.zeros(_fused.KP)
    _numba.run(_fused.expected_counts, c.indptr, c.indices, c.data, T, weight, 0, I, N_ref, n_ref)
    N, n_k = np.full((JK, _fused.KP), np.nan), np.full(_fused.KP, np.nan)
    rating = np.arange(JK, dtype=np.int64) % K
    _numba.run(_fused.majority_sums, c.indptr, c.indices, c.data, rating, known, weight, K, N, n_k)
    np.testing.assert_array_equal(N, N_ref)
    np.testing.assert_array_equal(n_k, n_ref)
    if known[3] < 0:
        np.testing.assert_array_equal(T[3], np.full(K, 1.0 / K))


@pytest.mark.parametrize("model", VARIANTS)
def test_the_fused_majority_start_gives_the_fit_of_the_vote_as_a_start(repeated, model):
    """init="majority" (one fused pass) and the same vote passed as a start array give the same fit."""
    data, known = repeated
    vote = soft_majority_vote(data.counts, data.n_categories)
    # compress=False: with compression a start array is averaged within groups of equal rows
    kw = dict(model=model, method="ml", max_iter=30, known=known, compress=False)
    a = _fit(data, "numba", init="majority", **kw)
    codes = data.known_codes(known)
    rows = np.flatnonzero(codes >= 0)
    vote[rows] = 0.0
    vote[rows, codes[rows]] = 1.0
    b = _fit(data, "numba", init=vote, **kw)
    assert a.start == "majority" and a.n_iter == b.n_iter
    # a start array is renormalised when checked (rounding of the last bit), so equal to rounding only
    np.testing.assert_allclose(a.pi, b.pi, rtol=1e-13)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(a.class_probs, b.class_probs, rtol=1e-12, atol=1e-16)


@pytest.mark.parametrize("case", ["few raters", "many raters", "many raters, every row twice"])
def test_the_compiled_compression_check_counts_the_buckets_numpy_counts(case):
    """may_compress with the kernel: the same occupied-bucket count, so the same decision, as the numpy route."""
    import scipy.sparse as sp

    from pyrater.inference.em import compress

    J = 6 if case == "few raters" else 400
    c = simulate_dawid_skene(3000, J, n_categories=4, raters_per_item=3, seed=5).data.counts.copy()
    if case.endswith("twice"):
        c = sp.vstack([c, c], format="csr")
    c.data[c.indptr[5] : c.indptr[6]] = 0.0
    c.eliminate_zeros()  # row 5 empty
    I = c.shape[0]
    bits = int(min(26, max(10, np.ceil(np.log2(8 * I)))))
    got = _numba.run(_fused.occupied_key_buckets, c.indptr, c.indices, bits)
    n = np.diff(c.indptr).astype(np.uint64)
    first = np.where(n > 0, c.indices[np.minimum(c.indptr[:-1], c.nnz - 1)], 0).astype(np.uint64)
    last = np.where(n > 0, c.indices[np.maximum(c.indptr[1:] - 1, 0)], 0).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = n ^ (first * np.uint64(0x9E3779B97F4A7C15)) ^ (last * np.uint64(0xC2B2AE3D27D4EB4F))
        key = (key * np.uint64(0xD6E8FEB86659FD93)) >> np.uint64(64 - bits)
    assert got == np.unique(key).size
    decision = compress.may_compress(c)
    assert compress.may_compress(c, _fused) == decision
    assert decision == (case != "many raters")  # both outcomes are exercised


def test_a_compile_that_numbas_cache_cannot_serve_is_announced_once(monkeypatch, tmp_path, capsys):
    import numba

    from pyrater.models import _fused as fused

    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path))  # an empty cache, as on a new machine

    @numba.njit(cache=True)
    def double(x):
        return 2.0 * x

    fused._say_compiling.cache_clear()
    assert not fused._on_disk(double)
    fused.compile_for(double, 1.0)
    fused.compile_for(double, np.int64(1))  # a second compile in the same process: said once
    assert capsys.readouterr().err.count("pyrater: compiling the numba kernels") == 1
    assert double(2.0) == 4.0
    # a kernel numba keeps on disk, compiled before (the EM fits above): nothing is said
    fused._say_compiling.cache_clear()
    em(simulate_dawid_skene(20, 3, n_categories=2, seed=1).data, backend="numba", method="ml")
    assert fused._on_disk(_fused.em_iteration)
    assert "compiling" not in capsys.readouterr().err


def test_prefer_wide_vectors_marks_the_calling_function_only():
    # the kernels ask LLVM for 512-bit vectors through a per-function attribute (no global numba
    # option); a function that does not call the intrinsic keeps LLVM's default
    import numba

    from pyrater.models._fused import prefer_wide_vectors

    @numba.njit(cache=False)
    def wide(x):
        prefer_wide_vectors()
        return x + 1.0

    @numba.njit(cache=False)
    def plain(x):
        return x + 1.0

    assert wide(1.0) == plain(1.0) == 2.0
    attr = '"prefer-vector-width"="512"'
    assert attr in "".join(wide.inspect_llvm().values())
    assert attr not in "".join(plain.inspect_llvm().values())


def test_the_stopping_rule_takes_the_m_steps_change_of_theta_as_its_own():
    # the fused Dawid-Skene M-step hands Convergence max |theta - previous theta|; the rule must
    # then decide exactly as when it compares its own copy of theta
    from pyrater.inference.em.convergence import Convergence

    rng = np.random.default_rng(7)
    J, K = 6, 3
    thetas = [rng.dirichlet(np.ones(K), size=(J, K))]
    for t in range(12):  # geometrically settling parameters, as EM's
        thetas.append(thetas[-1] + 0.5**t * 1e-3 * rng.standard_normal((J, K, K)))
    pis = [np.full(K, 1.0 / K) + 1e-9 * t for t in range(len(thetas))]
    trace = list(-100.0 - 0.5 ** np.arange(len(thetas)))
    own, given = Convergence(1e-8, 1e-6), Convergence(1e-8, 1e-6)
    for t in range(len(thetas)):
        change = None if t == 0 else float(np.max(np.abs(thetas[t] - thetas[t - 1])))
        a = own.settled(trace[: t + 1], pis[t], thetas[t])
        b = given.settled(trace[: t + 1], pis[t], thetas[t], theta_change=change)
        assert a == b and own.want_T == given.want_T
        assert own.deltas == given.deltas
        np.testing.assert_equal(own.param_distance, given.param_distance)
    assert own.deltas and given.prev is not None and given.prev[1] is None  # no copy of theta kept
