"""``fit(data, "auto")`` picks the generating family on data simulated from each newer family.

Issues 25 (item 5) and 26 (item 3): MACE, pooled and community (crowd models), ordinal and
item_difficulty (companion issue).  The designs give each family the structure it exists for
(spammers who answer alike, many raters with few ratings, a community of confused raters,
graded near misses, items of unequal difficulty), so that the generating family predicts
held-out items clearly better than the others; ``tests/test_choose.py`` covers Dawid-Skene,
one-coin and homogeneous data and the rule itself.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrater


def _auto(data, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampler notes of short runs, the vote model's warning
        return pyrater.fit(data, "auto", seed=1, progress=False, **kwargs)


@pytest.mark.parametrize("seed", [3, 4])
def test_auto_picks_mace_where_spammers_answer_alike(seed):
    """Three spammers who mostly say the first category: MACE's xi, not one-coin's even spread."""
    J = 12
    xi = np.full((J, 3), 1 / 3)
    xi[6:9] = [0.9, 0.05, 0.05]
    competence = np.array([0.9, 0.85, 0.8, 0.9, 0.75, 0.85, 0.05, 0.1, 0.05, 0.8, 0.9, 0.85])
    sim = pyrater.simulate("mace", 400, J, n_categories=3, raters_per_item=4, seed=seed, competence=competence, xi=xi)
    f = _auto(sim.data, candidates=["dawid_skene", "one_coin", "mace", "homogeneous"])
    assert f.model.name == "mace", f.model_choice.table
    assert f.model_choice.table.loc["one_coin", "elpd_diff"] < -50  # one-coin cannot hold the spam


def test_auto_by_gibbs_picks_pooled_where_raters_rate_little():
    sim = pyrater.simulate("pooled", 400, 60, n_categories=3, raters_per_item=3, seed=4)  # 20 ratings each
    f = _auto(sim.data, method="gibbs", candidates=["dawid_skene", "pooled"], chains=2, warmup=200, draws=300)
    assert f.model.name == "pooled", f.model_choice.table


@pytest.mark.parametrize("seed", [5, 6])
def test_auto_by_gibbs_picks_community_where_a_third_of_the_raters_are_confused(seed):
    m = np.array([[[0.9, 0.1], [0.1, 0.9]], [[0.3, 0.7], [0.7, 0.3]]])
    J = 150
    community = (np.arange(J) % 3 == 0).astype(int)
    sim = pyrater.simulate(
        "community", 600, J, n_categories=2, raters_per_item=3, seed=seed, n_communities=2, m=m, s=40.0,
        community=community,
    )  # fmt: skip
    f = _auto(
        sim.data, method="gibbs", candidates=["dawid_skene", "pooled", "community"], chains=2, warmup=200, draws=300
    )
    table = f.model_choice.table
    assert f.model.name == "community", table
    assert table.loc["pooled", "elpd_diff"] < -2 * table.loc["pooled", "dse"]  # one population is not enough


def test_auto_picks_ordinal_on_graded_near_misses():
    sim = pyrater.simulate("ordinal", 400, 40, n_categories=5, raters_per_item=3, seed=1)  # 30 ratings each
    f = _auto(sim.data, candidates=["dawid_skene", "ordinal"])
    assert f.model.name == "ordinal", f.model_choice.table


def test_auto_by_em_tries_item_difficulty_on_binary_data_unnamed_and_picks_it_on_items_of_unequal_difficulty():
    from pyrater.checking.choose import default_candidates
    from pyrater.models.item_difficulty import AUTO_EM_MAX_RATINGS

    sim = pyrater.simulate("item_difficulty", 400, 8, raters_per_item=5, seed=2, difficulty_scale=2.0)
    f = _auto(sim.data)  # no candidates named: every default family of EM on binary data
    table = f.model_choice.table
    assert f.model.name == "item_difficulty", table
    assert {"dawid_skene", "one_coin", "mace"} <= set(table.index)
    assert table.loc["dawid_skene", "elpd_loo"] < table.loc["item_difficulty", "elpd_loo"] - 4
    # at K >= 3 (its errors spread evenly) and without data it is a candidate only when named
    assert "item_difficulty" in default_candidates("em", 2, 10_000)
    assert "item_difficulty" not in default_candidates("em", 3, 10_000)
    assert "item_difficulty" not in default_candidates("em")
    assert "item_difficulty" in default_candidates("mcmc")  # the samplers and optimize: at every K
    # above the size limit it is left out, and the fit says why
    assert "item_difficulty" not in default_candidates("em", 2, AUTO_EM_MAX_RATINGS + 1)
    why = pyrater.get_model("item_difficulty").auto_default("em", 2, AUTO_EM_MAX_RATINGS + 1)
    assert "name it in candidates" in why


@pytest.mark.stan
def test_auto_by_nuts_picks_item_difficulty_on_items_of_unequal_difficulty():
    sim = pyrater.simulate("item_difficulty", 150, 6, seed=2, difficulty_scale=2.0)
    f = _auto(sim.data, method="mcmc", candidates=["dawid_skene", "item_difficulty"], chains=2, warmup=300, draws=300)
    table = f.model_choice.table
    assert f.model.name == "item_difficulty", table
    # item difficulty predicts held-out items better than Dawid-Skene by more than the equivalence margin (4)
    assert table.loc["dawid_skene", "elpd_loo"] < table.loc["item_difficulty", "elpd_loo"] - 4
