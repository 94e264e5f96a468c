"""Fits of the item-difficulty family: class probabilities and ``log_lik`` from the per-item parameters.

The shared kernels of :class:`~pyrater.fits.draws.DrawsFit` read one error
matrix per rater; under the item-difficulty model every (item, rater) pair
has its own response probabilities, so these fits compute the per-item log
joint ``log p(y_i, z_i = k)`` from the draws (or the mode) of ``pi``, the
rater and the item parameters with
:func:`pyrater.models.item_difficulty.item_log_joint`, in blocks of draws:

* class probabilities: the mean over draws of ``P(z_i | y_i, draw)``
  (Rao-Blackwellised), one-hot for a unit of known class;
* ``log_lik``: the stored per-item values Stan wrote, else recomputed.

``theta`` among the draws (what ``point_estimate("theta")`` and the summary
report) is each rater's error matrix on an item of difficulty 0,
discrimination 1 and no guessing; :meth:`ItemLevelMixin.item_parameters` and
:meth:`ItemLevelMixin.rater_parameters` report the model's own parameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, logsumexp

from ..models import Model
from ..models.item_difficulty import item_log_joint
from .base import Fit
from .draws import DrawsFit, safe_log
from .em import EMFit
from .mcmc import MCMCFit
from .optimize import OptimizeFit
from .pathfinder import PathfinderFit

__all__ = [
    "ItemLevelMixin",
    "ItemDifficultyMCMCFit",
    "ItemDifficultyPathfinderFit",
    "ItemDifficultyOptimizeFit",
    "ItemDifficultyEMFit",
    "fit_class",
    "parameter_draws",
    "condition_on_known",
]

#: draws per block of the log-joint computation (bounds memory to ~ block x ratings x 8 bytes x a few)
_BLOCK = 64
#: the model's own parameters reported by the summary and diagnostics, after pi and theta
OWN_PARAMETERS = ("logit_sens", "logit_spec", "difficulty", "discrimination", "guessing")


def parameter_draws(values: Mapping[str, Any], lead: int) -> dict[str, Any]:
    """The log joint's arguments from draws or a mode, flattened to ``(S, ...)``.

    Parameters
    ----------
    values : mapping
        ``pi``, ``logit_sens``, ``logit_spec``, ``difficulty``,
        ``discrimination`` and ``guessing`` (the last two may be empty or absent),
        each with ``lead`` leading sample axes (2: chain, draw; 0: a mode).

    Returns
    -------
    dict
        ``log_pi`` (S, 2), ``logit_sens`` and ``logit_spec`` (S, J),
        ``difficulty`` (S, I), ``discrimination`` and ``guessing`` (S, I) or None.
    """
    S = int(np.prod(np.shape(values["pi"])[:lead]))

    def flat(name: str) -> np.ndarray:
        arr = np.asarray(values[name], dtype=float)
        return arr.reshape(S, *arr.shape[lead:])

    out: dict[str, Any] = {
        "log_pi": safe_log(flat("pi")),
        "logit_sens": flat("logit_sens"),
        "logit_spec": flat("logit_spec"),
        "difficulty": flat("difficulty"),
    }
    for name in ("discrimination", "guessing"):
        arr = flat(name) if name in values else np.empty((S, 0))
        out[name] = arr if arr.shape[-1] else None
    return out


def _block(params: dict[str, np.ndarray | None], lo: int, hi: int) -> dict[str, Any]:
    return {k: (None if v is None else v[lo:hi]) for k, v in params.items()}


def condition_on_known(lj: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """``lj`` (S, I, 2) with the classes of known units fixed (other class -inf), in place."""
    if known is not None:
        rows = np.flatnonzero(np.asarray(known) >= 0)
        other = 1 - np.asarray(known)[rows]
        lj[:, rows, other] = -np.inf
    return lj


class ItemLevelMixin(Fit):
    """Class probabilities, ``log_lik`` and parameter tables of a fit with per-item parameters."""

    known: np.ndarray | None
    model: Model

    # a subclass gives its parameter values with their leading sample axes
    def _values(self) -> tuple[Mapping[str, Any], int]:
        raise NotImplementedError

    def _params(self) -> dict[str, Any]:
        values, lead = self._values()
        return parameter_draws(values, lead)

    def _log_joint_blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(lo, hi, lj)``: the log joint (hi - lo, I, 2) of blocks of draws, known classes fixed."""
        params = self._params()
        S = params["log_pi"].shape[0]
        for lo in range(0, S, _BLOCK):
            hi = min(S, lo + _BLOCK)
            b = _block(params, lo, hi)
            lj = item_log_joint(self.data.counts, **b)
            yield lo, hi, condition_on_known(lj, self.known)

    @cached_property
    def _item_probs(self) -> np.ndarray:
        total = np.zeros((self.data.n_units, 2))
        S = 0
        for lo, hi, lj in self._log_joint_blocks():
            total += np.exp(lj - logsumexp(lj, axis=2, keepdims=True)).sum(axis=0)
            S += hi - lo
        return total / S

    def _class_probs(self) -> np.ndarray:
        return self._item_probs

    def item_log_lik(self) -> np.ndarray:
        """``log p(y_i | draw)`` per draw and item, shape (S, I), recomputed from the parameters."""
        out = []
        for _, _, lj in self._log_joint_blocks():
            out.append(logsumexp(lj, axis=2))
        return np.concatenate(out, axis=0)

    def item_parameters(self) -> pd.DataFrame:
        """Per item (rows, the data's items): posterior mean (or mode) of difficulty, discrimination, guessing."""
        p = self._params()
        I = self.data.n_units
        disc = p["discrimination"]
        guess = p["guessing"]
        return pd.DataFrame(
            {
                "difficulty": np.asarray(p["difficulty"]).mean(axis=0),
                "discrimination": np.ones(I) if disc is None else disc.mean(axis=0),
                "guessing": np.zeros(I) if guess is None else guess.mean(axis=0),
            },
            index=self.data.unit_labels.rename("item"),
        )

    def rater_parameters(self) -> pd.DataFrame:
        """Per rater: posterior mean (or mode) of the logit sensitivity / specificity and of the probabilities.

        ``sensitivity`` and ``specificity`` are on an item of difficulty 0,
        discrimination 1 and no guessing.
        """
        p = self._params()
        sens, spec = np.asarray(p["logit_sens"]), np.asarray(p["logit_spec"])
        return pd.DataFrame(
            {
                "logit_sens": sens.mean(axis=0),
                "logit_spec": spec.mean(axis=0),
                "sensitivity": expit(sens).mean(axis=0),
                "specificity": expit(spec).mean(axis=0),
            },
            index=self.data.rater_labels.rename("rater"),
        )


class _ItemLevelDraws(ItemLevelMixin, DrawsFit):
    """Draws-based fits: the per-draw log joint from the draws; diagnostics include the model's parameters."""

    def _values(self) -> tuple[Mapping[str, Any], int]:
        return self.draws, 2

    def _effective_draws(self) -> tuple[np.ndarray, np.ndarray]:
        """Not available: the response probabilities differ by item, so no per-rater theta gives the likelihood."""
        raise NotImplementedError(
            f"the {self.model.title} model has per-item response probabilities: no error matrices give its "
            "likelihood (use the stored log_lik, or item_log_lik())"
        )

    def log_lik_units(self, units: tuple[int, int] | None = None, out: np.ndarray | None = None, progress=None):
        """Per-item log-likelihood of every draw, items as rows: Stan's stored values, else recomputed."""
        if self.has_log_lik:
            return super().log_lik_units(units, out=out, progress=progress)
        lo, hi = (0, self.data.n_units) if units is None else units
        block = np.ascontiguousarray(self.item_log_lik()[:, lo:hi].T)
        if out is None:
            return block
        out[...] = block
        return out

    def _parameter_blocks(self) -> tuple[list[tuple[np.ndarray, int]], list[str]]:
        blocks, names = super()._parameter_blocks()
        C, S = np.asarray(self.draws["pi"]).shape[:2]
        labels = {
            "rater": [str(r) for r in self.data.rater_labels],
            "item": [str(i) for i in self.data.unit_labels],
        }
        for name in OWN_PARAMETERS:
            if name not in self.draws:
                continue
            arr = np.asarray(self.draws[name]).reshape(C, S, -1)
            if arr.shape[2] == 0:
                continue
            blocks.append((arr, 1))
            if name.startswith("logit_"):
                names += [f"{name}[{r}]" for r in labels["rater"]]
            else:
                names += [f"{name}[{i}]" for i in labels["item"]]
        return blocks, names


class ItemDifficultyMCMCFit(_ItemLevelDraws, MCMCFit):
    """An item-difficulty model fitted by NUTS (the fields of :class:`~pyrater.fits.mcmc.MCMCFit`)."""


class ItemDifficultyPathfinderFit(_ItemLevelDraws, PathfinderFit):
    """An item-difficulty model fitted by Pathfinder (the fields of :class:`~pyrater.fits.pathfinder.PathfinderFit`)."""


class ItemDifficultyOptimizeFit(ItemLevelMixin, OptimizeFit):
    """An item-difficulty model at its posterior mode (the fields of :class:`~pyrater.fits.optimize.OptimizeFit`)."""

    def _values(self) -> tuple[Mapping[str, Any], int]:
        return self.params, 0

    @cached_property
    def _probs(self) -> np.ndarray:
        return self._item_probs


class ItemDifficultyEMFit(ItemLevelMixin, EMFit):
    """An item-difficulty model fitted by EM (the fields of :class:`~pyrater.fits.em.EMFit`).

    ``model_params`` holds ``logit_sens``, ``logit_spec`` (J,) and
    ``difficulty`` (and ``discrimination``, ``guessing`` where the variant
    has them) (I,); ``theta`` each rater's error matrix on an item of
    difficulty 0, discrimination 1 and no guessing; ``class_probs`` the
    per-item class probabilities at the estimate.  ``method="em_ml"`` is
    maximum likelihood in pi and the raters with the item parameters at their
    penalised mode (:mod:`pyrater.inference.em.item_difficulty`).
    """

    def _values(self) -> tuple[Mapping[str, Any], int]:
        return {"pi": self.pi, **(self.model_params or {})}, 0

    def _class_probs(self) -> np.ndarray:
        return self.class_probs

    def _objective_name(self) -> str:
        if self.method == "em_ml":
            return "maximum likelihood in pi and the raters, item parameters at their penalised mode"
        return "posterior mode (the density Stan's optimizer maximises, without Jacobian)"

    def _summary_info(self) -> dict[str, Any]:
        info = super()._summary_info()
        info["algorithm"] = "generalised EM (block Newton M-steps), " + self._objective_name()
        info["variant"] = getattr(self.model, "variant", "")
        return info


_FIT_CLASSES: dict[tuple[str, type[Fit]], type[Fit]] = {
    ("item_difficulty", EMFit): ItemDifficultyEMFit,
    ("item_difficulty", MCMCFit): ItemDifficultyMCMCFit,
    ("item_difficulty", PathfinderFit): ItemDifficultyPathfinderFit,
    ("item_difficulty", OptimizeFit): ItemDifficultyOptimizeFit,
}


def fit_class(model: Model, base: type[Fit]) -> type[Any]:
    """The fit class of ``model`` for a method's base class (``base`` itself for the Dawid-Skene-type families)."""
    return _FIT_CLASSES.get((model.name, base), base)
