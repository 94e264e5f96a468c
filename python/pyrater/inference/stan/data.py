"""Data and initial values for pyrater's Stan programs.

Every program in ``stan/`` (``dawid_skene``, ``hierarchical``,
``class_conditional``, ``homogeneous``, ``one_coin``, ``mace``) reads the same data layout, built
here from a :class:`~pyrater.data.RatingData`:

=================  ==========================  =========================================
name               type                        meaning
=================  ==========================  =========================================
``K``              int                         number of categories
``J``              int                         number of raters
``I``              int                         number of units (items, or patterns)
``weight``         int array (I,)              items per unit: 1, or the pattern tally
``nnz``            int                         nonzeros of the count matrix
``w``              float array (nnz,)          CSR values: counts ``C[i, j*K + l]``
``v``              int array (nnz,)            CSR column indexes, 1-based
``u``              int array (I + 1,)          CSR row starts, 1-based
``known``          int array (I,)              known true class (1..K), 0 = unknown
``alpha``          float array (K,)            Dirichlet prior on pi
``beta``           float (J, K, K) or (K, K)   Dirichlet prior on error-matrix rows
                                               (Dawid-Skene; homogeneous)
``beta1, beta2``   float array (K,) or float   Beta prior on accuracies (class-conditional
                                               (K,); one-coin, scalars); on competences (MACE)
``gamma``          float array (K,)            Dirichlet prior on spamming distributions (MACE)
(item_difficulty)  see its program             variant switches and priors; the marginal
                                               variant's quadrature rule (``Q``, ``node_*``)
``write_log_lik``  int 0/1                     write the per-unit ``log_lik``
=================  ==========================  =========================================

``C`` is :attr:`RatingData.counts`: entry ``(i, j*K + l)`` (0-based) counts the
times rater ``j`` gave rating ``l`` to unit ``i``; the Stan programs compute
the unit log joint as K sparse products ``C @ log_theta_mat[:, k]``.

:func:`stan_inits` gives diagonal-heavy initial values (raters mostly right),
which, like the default priors, keep every chain on the same labelling of
the classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validation import check_int
from ...data.ratings import RatingData
from ...models import MODEL_NAMES, Model, get_model

__all__ = [
    "stan_data",
    "stan_inits",
    "data_inits",
    "STAN_MODEL_NAMES",
    "STAN_PROGRAM_NAMES",
    "ERROR_MATRIX_MODEL_NAMES",
]

#: Names of the Stan programs (``stan/<name>.stan``): the families fitted by NUTS.
STAN_MODEL_NAMES: tuple[str, ...] = tuple(name for name in MODEL_NAMES if "mcmc" in get_model(name).methods)
#: The Stan programs of the Dawid-Skene-type families: per-rater error matrices, any K (all but item_difficulty).
ERROR_MATRIX_MODEL_NAMES: tuple[str, ...] = tuple(name for name in STAN_MODEL_NAMES if not get_model(name).item_level)
#: The family of every Stan program: the families' own and their variants' (``stan_variants``).
PROGRAM_FAMILY: dict[str, str] = {
    **{name: name for name in STAN_MODEL_NAMES},
    **{variant: name for name in STAN_MODEL_NAMES for variant in get_model(name).stan_variants},
}
#: Names of all Stan programs (``stan/<name>.stan``).
STAN_PROGRAM_NAMES: tuple[str, ...] = tuple(PROGRAM_FAMILY)


def _model(model: Model | str) -> Model:
    if isinstance(model, str) and model in PROGRAM_FAMILY:
        model = PROGRAM_FAMILY[model]
    model = get_model(model)
    if model.name not in STAN_MODEL_NAMES:  # pragma: no cover - guarded by get_model
        raise ValueError(f"no Stan program for model {model.name!r}; choose one of {STAN_MODEL_NAMES}")
    return model


def stan_data(
    data: RatingData,
    model: Model | str,
    known: np.ndarray | None = None,
    log_lik: bool = True,
) -> dict[str, Any]:
    """Data dictionary for the Stan program of ``model``.

    Parameters
    ----------
    data : RatingData
        The ratings (long, wide or grouped; grouped patterns enter with
        their tallies as weights).
    model : model object or name
        A model from :mod:`pyrater.models` (its priors are resolved for the
        data's K and J), or its name.
    known : int array, shape (I,), optional
        Known true class per unit as 0-based category codes, ``-1`` where
        unknown (what :meth:`RatingData.known_codes` returns).  A known
        unit's likelihood is ``p(y_i, z_i = known_i)``.
    log_lik : bool
        Write the per-unit ``log_lik`` in generated quantities (needed for
        LOO / WAIC; switch off for very large data).

    Returns
    -------
    dict
        Keys as in the module docstring; integer arrays are ``int64``,
        real arrays ``float64``, ready for pystan or cmdstanpy.

    Raises
    ------
    TypeError
        ``data`` is not a RatingData.
    ValueError
        Bad ``known`` codes or priors, or no ratings at all.

    Examples
    --------
    >>> from pyrater.inference.stan.data import stan_data
    >>> import pandas as pd
    >>> from pyrater import RatingData, DawidSkene
    >>> df = pd.DataFrame({"item": [1, 1, 2], "rater": ["a", "b", "a"], "rating": [1, 2, 2]})
    >>> d = stan_data(RatingData.from_long(df), DawidSkene())
    >>> d["K"], d["J"], d["I"], d["nnz"], d["u"].tolist()
    (2, 2, 2, 3, [1, 3, 4])
    """
    if not isinstance(data, RatingData):
        raise TypeError(f"data must be a RatingData (see pyrater.as_rating_data); got {type(data).__name__}")
    model = _model(model)
    if not model.pattern_units and data.is_grouped:
        raise ValueError(
            f"the {model.name} program has per-item parameters and reads one unit per item; expand grouped data "
            "first with model.prepare_data(data) (pyrater.fit does this)"
        )
    K, J, I = data.n_categories, data.n_raters, data.n_units
    counts = data.counts.tocsr(copy=True)
    counts.sum_duplicates()
    counts.sort_indices()
    if counts.nnz == 0:
        raise ValueError("the data hold no ratings; nothing to fit")
    w = np.asarray(counts.data, dtype=float)
    if np.any(w != np.round(w)) or np.any(w < 0):  # pragma: no cover - counts are built from codes
        raise ValueError("the count matrix must hold non-negative integers")
    out: dict[str, Any] = {
        "K": int(K),
        "J": int(J),
        "I": int(I),
        "weight": np.asarray(data.weight, dtype=np.int64).copy(),
        "nnz": int(counts.nnz),
        "w": w,
        "v": np.asarray(counts.indices, dtype=np.int64) + 1,
        "u": np.asarray(counts.indptr, dtype=np.int64) + 1,
        "known": _known(known, I, K),
    }
    out.update(model.stan_priors(model.priors(K, J), K, J))
    out.update(model.stan_unit_data(data))
    out["write_log_lik"] = int(bool(log_lik))
    return out


def _known(known: np.ndarray | None, I: int, K: int) -> np.ndarray:
    """0-based codes with -1 unknown -> Stan's 1-based codes with 0 unknown."""
    if known is None:
        return np.zeros(I, dtype=np.int64)
    arr = np.asarray(known)
    if arr.shape != (I,):
        raise ValueError(f"known must have shape (I,) = ({I},), one code per unit; got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"known must hold integer category codes (-1 = unknown); got dtype {arr.dtype}")
    bad = (arr < -1) | (arr >= K)
    if bad.any():
        raise ValueError(
            f"known codes must lie in -1 .. {K - 1} (-1 = unknown); units {np.flatnonzero(bad)[:8].tolist()} "
            f"hold {np.unique(arr[bad])[:8].tolist()}"
        )
    return arr.astype(np.int64) + 1


def stan_inits(
    model: Model | str, K: int, J: int, n: int, seed: int | None = None, n_items: int = 0
) -> list[dict[str, np.ndarray]]:
    """Diagonal-heavy initial values, one dict per chain (or optimiser start).

    Every start has raters mostly right (``theta[j, k, k]`` between 0.6 and
    0.85, as rater does), so all chains begin on the same labelling of the
    classes and label switching between chains is avoided.  The values are
    jittered so that starts differ.

    Parameters
    ----------
    model : model object or name
    K, J : int
        Number of categories and raters.
    n : int
        Number of dicts (chains or optimiser starts).
    seed : int, optional
        Seed of the jitter; the same seed gives the same values.
    n_items : int
        Number of items (units), for a family with per-item parameters
        (item_difficulty: near-average items, little guessing).

    Returns
    -------
    list of dict
        Keys are the Stan program's parameters: ``pi`` and ``theta``
        (Dawid-Skene ``(J, K, K)``, homogeneous ``(K, K)``); ``pi`` and
        ``p`` ``(J, K)`` (class-conditional) or ``(J,)`` (one-coin); ``pi``, ``competence``
        ``(J,)`` and ``xi`` ``(J, K)`` (MACE); ``pi``, ``mu`` ``(K, K)``,
        ``sigma`` ``(K, K)`` and ``gamma_raw`` ``(J, K, K)`` (hierarchical);
        rater, scale and item parameters (item_difficulty).
    """
    model = _model(model)
    for name, value, low in (("K", K, 2), ("J", J, 1), ("n", n, 1)):
        check_int(name, value, low)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        pi = rng.dirichlet(np.full(K, 50.0))
        out.append({"pi": pi / pi.sum(), **model.stan_init(rng, K, J), **model.stan_item_init(rng, n_items)})
    return out


def data_inits(model_name: str, data: dict[str, Any], n: int, seed: int | None = None) -> list[dict[str, np.ndarray]]:
    """:func:`stan_inits` for the program variant and sizes a Stan data dict (from :func:`stan_data`) selects."""
    model = type(_model(model_name)).from_stan_data(data)
    return stan_inits(model, int(data["K"]), int(data["J"]), n, seed, n_items=int(data["I"]))
