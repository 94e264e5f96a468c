"""Built-in example data.

:func:`anesthesia` and :func:`caries` are the two classic small data sets
that R's rater package ships (real ratings; sources in
``pyrater/data/_datasets/SOURCE.md``): the anaesthesia data of Dawid and Skene
(1979), long format, and the dental caries data of Espeland and Handelman
(1989), grouped format.  They come with the package, so no download and no
``../shared`` folder is needed.

:func:`pyrater.datasets.example_ratings` is a small, seeded clinical-style data set with
string labels, an incomplete design and some repeated ratings: the example
used by the README's main command (``pyrater demo``) and the notebooks.
It is simulated from the Dawid-Skene model, so the truth is known.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd

from .models import Simulation, simulate_dawid_skene

__all__ = ["anesthesia", "caries", "example_ratings", "example_simulation", "EXAMPLE_CATEGORIES", "EXAMPLE_RATERS"]

EXAMPLE_CATEGORIES = ("absent", "mild", "severe")
EXAMPLE_RATERS = ("dr_adams", "dr_baker", "dr_chen", "dr_diaz", "dr_evans", "dr_fox")
EXAMPLE_SEED = 2023


def _read(name: str) -> pd.DataFrame:
    with resources.files("pyrater.data").joinpath("_datasets", name).open("rb") as fh:
        return pd.read_csv(fh)


def anesthesia() -> pd.DataFrame:
    """Anaesthetists' ratings of patients' pre-operative health (Dawid and Skene 1979).

    45 patients (items) rated on a 4-point scale (1-4) by 5 anaesthetists
    (raters 1-5); rater 1 rated every patient three times, the others once.

    Returns
    -------
    DataFrame, shape (315, 3)
        Long format: columns ``item``, ``rater``, ``rating`` (integers).
        A fresh copy on every call.

    Examples
    --------
    >>> from pyrater.datasets import anesthesia
    >>> from pyrater import RatingData
    >>> RatingData.from_long(anesthesia()).n_items
    45
    """
    return _read("anesthesia.csv")


def caries() -> pd.DataFrame:
    """Dentists' caries diagnoses from radiographs (Espeland and Handelman 1989).

    3,859 tooth surfaces rated sound (1) or carious (2) by 5 dentists, as
    the 32 distinct rating patterns with their tallies.

    Returns
    -------
    DataFrame, shape (32, 6)
        Grouped format: columns ``rater_1`` ... ``rater_5`` and the tally
        ``n``.  A fresh copy on every call.

    Examples
    --------
    >>> from pyrater.datasets import caries
    >>> from pyrater import RatingData
    >>> RatingData.from_grouped(caries(), tally="n").n_items
    3859
    """
    return _read("caries.csv")


def example_simulation(n_items: int = 150, seed: int = EXAMPLE_SEED) -> Simulation:
    """The simulation behind :func:`pyrater.datasets.example_ratings` (truth included).

    Six raters of varying quality; each item is rated by four of them and
    then rated once more by ``dr_adams`` (so ``dr_adams`` has repeated
    ratings of some items).
    """
    K = len(EXAMPLE_CATEGORIES)
    pi = np.array([0.5, 0.3, 0.2])
    accuracy = np.array([0.9, 0.8, 0.75, 0.7, 0.65, 0.55])
    theta = np.empty((len(EXAMPLE_RATERS), K, K))
    for j, acc in enumerate(accuracy):
        # errors fall mostly on the neighbouring category of the ordinal scale
        dist = np.abs(np.subtract.outer(np.arange(K), np.arange(K)))
        off = np.divide(1.0, dist**2, out=np.zeros((K, K)), where=dist > 0)
        off /= off.sum(axis=1, keepdims=True)
        theta[j] = acc * np.eye(K) + (1 - acc) * off
    return simulate_dawid_skene(
        n_items=n_items, n_raters=len(EXAMPLE_RATERS), n_categories=K, pi=pi, theta=theta, raters_per_item=4, seed=seed
    )


def example_ratings(n_items: int = 150, seed: int = EXAMPLE_SEED) -> pd.DataFrame:
    """A long table (item, rater, rating) with string labels.

    Items are ``"case_001"`` ..., raters ``dr_adams`` ... ``dr_fox``, ratings
    ``absent`` / ``mild`` / ``severe``.  Items rated by ``dr_adams`` get a
    second rating from ``dr_adams`` (a repeated rating).
    """
    sim = example_simulation(n_items=n_items, seed=seed)
    data = sim.data
    item = data.unit
    rater = data.rater
    rating = data.rating
    # a second look by rater 0 at the items it rated, drawn from its error matrix
    rng = np.random.default_rng(seed + 1)
    again = np.flatnonzero(rater == 0)
    z = np.asarray(sim.z)[item[again]]
    u = rng.random(again.size)
    second = (u[:, None] > np.cumsum(sim.theta[0][z], axis=1)).sum(axis=1)
    item = np.concatenate([item, item[again]])
    rater = np.concatenate([rater, rater[again]])
    rating = np.concatenate([rating, second])
    order = np.lexsort((rater, item))
    width = len(str(n_items))
    labels = np.array([f"case_{int(i):0{width}d}" for i in data.unit_labels])
    return pd.DataFrame(
        {
            "item": labels[item[order]],
            "rater": np.asarray(EXAMPLE_RATERS)[rater[order]],
            "rating": np.asarray(EXAMPLE_CATEGORIES)[rating[order]],
        }
    )
