"""Calibration study: coverage of bootstrap intervals on simulated correlated annotators.

Data sets are simulated from the probit model (:func:`simulate_study`);
each model is bootstrapped on each data set and its central intervals are
checked against the truth, for two targets:

``"sample"``
    the number of positives among each group's test items (fixed sample:
    validation resampling, pi draws and z draws on, test resampling off);
``"population"``
    the number of positives in each group's population (all steps on,
    expansion ``N_g * count / n_g``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._quiet import import_tqdm
from .bootstrap import BootstrapSettings, ProbitDawidSkene, _resample_and_sum
from .simulate import equicorrelation, simulate_study

tqdm = import_tqdm()

__all__ = ["default_simulation", "default_models", "calibration_study", "coverage_table"]


def default_simulation(J: int = 5) -> dict[str, Any]:
    """Simulation settings of the calibration study.

    Five annotators with false-positive rates 0.08-0.20 and sensitivities
    0.70-0.85; latent equicorrelation 0.3 among negatives and 0.5 among
    positives; 500 validation items (30% positive); 10 groups of 100 test
    items drawn from populations of 2000 with prevalences ~ Beta(4, 20).
    """
    fpr = np.resize([0.10, 0.15, 0.08, 0.20, 0.12], J)
    tpr = np.resize([0.80, 0.75, 0.85, 0.70, 0.78], J)
    return dict(
        rates=np.stack([fpr, tpr]),
        R=np.stack([equicorrelation(J, 0.3), equicorrelation(J, 0.5)]),
        n_validation=500,
        validation_prevalence=0.3,
        n_groups=10,
        items_per_group=100,
        population_per_group=2000,
        group_prevalence=(4.0, 20.0),
    )


def default_models() -> dict[str, ProbitDawidSkene]:
    """The three models compared: probit (two estimators) and independence."""
    return {
        "probit (tetrachoric)": ProbitDawidSkene(correlation="tetrachoric"),
        "probit (signed probit)": ProbitDawidSkene(correlation="signed_probit"),
        "independence (R = I)": ProbitDawidSkene(correlation="independent"),
    }


def calibration_study(
    n_datasets: int,
    *,
    models: Mapping[str, ProbitDawidSkene] | None = None,
    targets: Sequence[str] = ("sample", "population"),
    simulation: Mapping[str, Any] | None = None,
    n_boot: int = 200,
    prob: float = 0.9,
    pi: Any = "prior",
    seed: int | None = 0,
    progress: bool = False,
) -> pd.DataFrame:
    """Simulate ``n_datasets`` studies and check each model's intervals.

    Parameters
    ----------
    n_datasets : int
    models : mapping name -> ProbitDawidSkene, optional (default :func:`default_models`)
    targets : subset of {"sample", "population"}
    simulation : keyword arguments of :func:`simulate_study` (default :func:`default_simulation`)
    n_boot : int
        Bootstrap replicates per fit.
    prob : float
        Interval probability (0.9).
    pi : prevalence option of :meth:`ProbitDawidSkene.bootstrap` (prior Beta(2, 10) by default).
    seed : int
        Data set ``d`` is simulated with seed ``(seed, d)`` and model ``m``
        is bootstrapped with seed ``(seed, d, m)``, so the models see the same
        data.  Both targets share one set of validation resamples per model
        (the same steps 1 and 4), each with its own steps 2, 3 and 5.

    Returns
    -------
    DataFrame with one row per (dataset, model, target, group): ``truth``,
    ``mean``, ``lower``, ``upper``, ``covered``, ``width``.
    """
    models = dict(default_models() if models is None else models)
    simulation = dict(default_simulation() if simulation is None else simulation)
    bad = [t for t in targets if t not in ("sample", "population")]
    if bad:
        raise ValueError(f"targets must be 'sample' and/or 'population', got {bad}")
    rows = []
    for d in tqdm(range(n_datasets), disable=not progress, desc="data sets"):
        sim = simulate_study(**simulation, seed=np.random.default_rng([seed or 0, d]))
        for m, (name, model) in enumerate(models.items()):
            rng = np.random.default_rng([seed or 0, d, m])
            # steps 1 and 4 (the orthant probabilities) are shared by both targets
            prep = model._prepare(sim.validation, sim.test, None, "gold", "group", sim.population)
            ll = model._replicate_log_likelihoods(prep, n_boot, True, rng)
            for target in targets:
                arrays = _resample_and_sum(
                    ll,
                    prep,
                    n_boot,
                    pi=pi,
                    pi_prior=(2.0, 10.0),
                    resample_test=(target == "population"),
                    sample_z=True,
                    rng=rng,
                )
                settings = BootstrapSettings(
                    n_boot=n_boot,
                    correlation=model.correlation,
                    resample_validation=True,
                    pi=pi,
                    pi_prior=(2.0, 10.0),
                    resample_test=(target == "population"),
                    sample_z=True,
                    n_qmc=model.n_qmc,
                    seed=None,
                )
                fit = model._result(prep, *arrays, settings=settings, prob=prob)
                which = "total" if target == "population" else "count"
                truth = sim.population_counts if target == "population" else sim.sample_counts
                iv = fit.interval(prob, which)
                mean = fit._draws(which).mean(axis=0)
                rows.append(
                    pd.DataFrame(
                        {
                            "dataset": d,
                            "model": name,
                            "target": target,
                            "group": iv.index,
                            "truth": truth.reindex(iv.index).to_numpy(),
                            "mean": mean.to_numpy(),
                            "lower": iv["lower"].to_numpy(),
                            "upper": iv["upper"].to_numpy(),
                        }
                    )
                )
    out = pd.concat(rows, ignore_index=True)
    out["covered"] = (out["lower"] <= out["truth"]) & (out["truth"] <= out["upper"])
    out["width"] = out["upper"] - out["lower"]
    return out


def coverage_table(study: pd.DataFrame) -> pd.DataFrame:
    """Coverage (with its binomial standard error), mean width, bias and RMSE per model and target."""
    g = study.assign(err=study["mean"] - study["truth"]).groupby(["target", "model"], sort=False)
    out = pd.DataFrame(
        {
            "intervals": g.size(),
            "coverage": g["covered"].mean(),
            "mean_width": g["width"].mean(),
            "bias": g["err"].mean(),
            "rmse": g["err"].apply(lambda e: float(np.sqrt(np.mean(e**2)))),
        }
    )
    out.insert(2, "coverage_se", np.sqrt(out["coverage"] * (1 - out["coverage"]) / out["intervals"]))
    return out
