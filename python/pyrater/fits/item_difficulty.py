"""Fits of the item-difficulty family: class probabilities and ``log_lik`` from the per-item parameters.

The shared kernels of :class:`~pyrater.fits.draws.DrawsFit` read one error
matrix per rater; under the item-difficulty model every (item, rater) pair
has its own response probabilities, so these fits compute the per-item log
joint ``log p(y_i, z_i = k)`` from the draws (or the mode) of ``pi``, the
rater and the item parameters with
:func:`pyrater.models.item_difficulty.item_log_joint_k`, in blocks of draws:

* class probabilities: the mean over draws of ``P(z_i | y_i, draw)``
  (Rao-Blackwellised), one-hot for a unit of known class;
* ``log_lik``: the stored per-item values Stan wrote, else recomputed.

The marginal variant (``ItemDifficulty(item_effects="marginal")``) has no
item parameters among its draws: its log joint integrates them out with the
model's quadrature rule (:func:`pyrater.models.item_marginal.node_log_lik_k`),
computed once per distinct row of the data and mapped back to the units;
:meth:`ItemLevelMixin.item_parameters` then reports each item's posterior mean
given its ratings (the quadrature's posterior weights).

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

from ..data.rows import compress_rows
from ..models import Model
from ..models.item_difficulty import ability_of, item_log_joint_k
from ..models.item_marginal import QuadratureRule, node_log_lik_k, rule_for
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
#: numbers per block of the marginal log joint (draws x distinct rows x nodes x 2), bounding its memory
_MARGINAL_BLOCK = 4_000_000
#: the model's own parameters reported by the summary and diagnostics, after pi and theta
OWN_PARAMETERS = ("logit_sens", "logit_spec", "logit_accuracy", "difficulty", "discrimination", "guessing")


def parameter_draws(values: Mapping[str, Any], lead: int) -> dict[str, Any]:
    """The log joint's arguments from draws or a mode, flattened to ``(S, ...)``.

    Parameters
    ----------
    values : mapping
        ``pi``; the rater parameters (``logit_sens`` and ``logit_spec`` at
        K = 2, ``logit_accuracy`` at K >= 3); ``difficulty``,
        ``discrimination`` and ``guessing`` (the last two may be empty or absent),
        each with ``lead`` leading sample axes (2: chain, draw; 0: a mode).

    Returns
    -------
    dict
        ``log_pi`` (S, K), ``ability`` (S, J, K) (each rater's logit accuracy
        per true class: :func:`~pyrater.models.item_difficulty.ability_of`),
        ``difficulty``, ``discrimination`` and ``guessing`` (S, I) or None (absent, or switched off:
        the marginal variant has none).
    """
    S = int(np.prod(np.shape(values["pi"])[:lead]))
    K = int(np.shape(values["pi"])[-1])

    def flat(name: str) -> np.ndarray:
        arr = np.asarray(values[name], dtype=float)
        return arr.reshape(S, *arr.shape[lead:])

    names = ("logit_accuracy",) if K > 2 else ("logit_spec", "logit_sens")
    out: dict[str, Any] = {
        "log_pi": safe_log(flat("pi")),
        "ability": ability_of({n: flat(n) for n in names}, K),
    }
    for name in ("difficulty", "discrimination", "guessing"):
        arr = flat(name) if name in values else np.empty((S, 0))
        out[name] = arr if arr.shape[-1] else None
    return out


def _block(params: dict[str, np.ndarray | None], lo: int, hi: int) -> dict[str, Any]:
    return {k: (None if v is None else v[lo:hi]) for k, v in params.items()}


def condition_on_known(lj: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """``lj`` (S, I, K) with the classes of known units fixed (the other classes -inf), in place."""
    if known is not None:
        rows = np.flatnonzero(np.asarray(known) >= 0)
        other = np.arange(lj.shape[-1])[None, :] != np.asarray(known)[rows, None]  # (n, K)
        lj[:, rows, :] = np.where(other[None], -np.inf, lj[:, rows, :])
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

    @property
    def marginal(self) -> bool:
        """True for the marginal variant (item parameters integrated out by quadrature)."""
        return bool(getattr(self.model, "marginal", False))

    @cached_property
    def _rule(self) -> QuadratureRule:
        return rule_for(self.model, self.data.counts)

    @cached_property
    def _distinct(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Distinct rows of the data (with their known class): first unit, inverse, known class per row."""
        counts = self.data.counts
        rows = compress_rows(counts, self.data.weight, None if self.known is None else np.asarray(self.known))
        if rows is None:  # pragma: no cover - a 64-bit hash collision: every unit is its own row
            rows = (np.arange(counts.shape[0]), np.arange(counts.shape[0]))
        first, inverse = rows
        known = None if self.known is None else np.asarray(self.known)[first]
        return first, inverse, known

    def _block_size(self) -> int:
        if not self.marginal:
            return _BLOCK
        G = self._distinct[0].size
        K = self.data.n_categories
        return int(max(1, min(_BLOCK, _MARGINAL_BLOCK // (K * G * self._rule.n_nodes))))

    def node_log_joint(self, b: Mapping[str, Any]) -> np.ndarray:
        """Marginal variant: ``log p(y_u, z_u = k, node q)`` of the distinct rows, (S, G, Q, K), known fixed.

        ``b`` holds ``log_pi`` (S, K) and ``ability`` (S, J, K); rows as :attr:`_distinct`.
        """
        first, _, known = self._distinct
        nl = node_log_lik_k(self.data.counts[first], b["ability"], self._rule)
        nl += self._rule.log_weight[None, None, :, None] + b["log_pi"][:, None, None, :]
        if known is not None:
            rows = np.flatnonzero(known >= 0)
            other = np.arange(nl.shape[-1])[None, :] != known[rows, None]  # (n, K)
            nl[:, rows] = np.where(other[None, :, None, :], -np.inf, nl[:, rows])
        return nl

    def _log_joint_blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(lo, hi, lj)``: the log joint (hi - lo, I, K) of blocks of draws, known classes fixed."""
        params = self._params()
        S = params["log_pi"].shape[0]
        step = self._block_size()
        for lo in range(0, S, step):
            hi = min(S, lo + step)
            b = _block(params, lo, hi)
            if self.marginal:
                lj = logsumexp(self.node_log_joint(b), axis=2)[:, self._distinct[1]]
                yield lo, hi, lj
            else:
                lj = item_log_joint_k(self.data.counts, self.data.n_categories, **b)
                yield lo, hi, condition_on_known(lj, self.known)

    def _marginal_item_means(self) -> dict[str, np.ndarray]:
        """Marginal variant: each unit's posterior mean of the item parameters given its ratings (I,) each."""
        params = self._params()
        rule = self._rule
        S = params["log_pi"].shape[0]
        values = np.stack([rule.difficulty, rule.discrimination, rule.guessing], axis=1)  # (Q, 3)
        total = np.zeros((self._distinct[0].size, 3))
        step = self._block_size()
        for lo in range(0, S, step):
            nl = self.node_log_joint(_block(params, lo, min(S, lo + step)))
            post = np.exp(nl - logsumexp(nl, axis=(2, 3), keepdims=True)).sum(axis=3)  # (s, G, Q)
            total += np.einsum("sgq,qp->gp", post, values)
        means = total[self._distinct[1]] / S
        return {"difficulty": means[:, 0], "discrimination": means[:, 1], "guessing": means[:, 2]}

    @cached_property
    def _item_probs(self) -> np.ndarray:
        total = np.zeros((self.data.n_units, self.data.n_categories))
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
        """Per item (rows, the data's units): posterior mean (or mode) of difficulty, discrimination, guessing.

        The marginal variant reports each unit's posterior mean given its ratings (averaged over the draws
        of the rater parameters; at the mode of a mode fit): the quadrature's posterior weights.
        """
        if self.marginal:
            return pd.DataFrame(self._marginal_item_means(), index=self.data.unit_labels.rename("item"))
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
        discrimination 1 and no guessing.  With K >= 3 categories: the
        columns ``logit_accuracy[c]`` and ``accuracy[c]`` for every category
        ``c`` (the probability of rating an item of true class ``c`` right).
        """
        p = self._params()
        ability = np.asarray(p["ability"])
        if ability.shape[-1] > 2:
            cats = [str(c) for c in self.data.categories]
            cols = {f"logit_accuracy[{c}]": ability[:, :, k].mean(axis=0) for k, c in enumerate(cats)}
            cols |= {f"accuracy[{c}]": expit(ability[:, :, k]).mean(axis=0) for k, c in enumerate(cats)}
            return pd.DataFrame(cols, index=self.data.rater_labels.rename("rater"))
        spec, sens = ability[..., 0], ability[..., 1]
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
            if name == "logit_accuracy":
                cats = [str(c) for c in self.data.categories]
                names += [f"{name}[{r}, {c}]" for r in labels["rater"] for c in cats]
            elif name.startswith("logit_"):
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

    ``model_params`` holds ``logit_sens``, ``logit_spec`` (J,) (K >= 3:
    ``logit_accuracy`` (J, K)) and
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
