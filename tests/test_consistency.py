"""What a new user noticed (issue 24, items 2 and 6): one rule per question, everywhere.

* ``pyrater.fit`` refuses every argument that the chosen method does not use,
  naming the methods that take it, and names a misspelt or misplaced argument
  as such (with its likely meaning) before any work; every sampler takes ``progress``.
* Seeds follow one rule for every method.
* ``score`` takes what ``calibrate`` takes (a fit, or a DataFrame).
* Gibbs diagnostics carry no NUTS-only fields; NUTS's do.
* The plots say what they show.
* ``pyrater --help`` does not load the fitting stack.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import _arviz
from pyrater.fitting import METHOD_ARGUMENTS, METHODS

matplotlib.use("Agg")

#: a value of each method-specific argument that its methods accept
VALUES = {
    "engine": "pystan",
    "chains": 2,
    "warmup": 10,
    "draws": 10,
    "inits": [{}, {}],
    "n_inits": 2,
    "log_lik": False,
    "thin": 2,
    "pi_moves": 1,
    "max_memory_gib": 2.0,
}


@pytest.fixture(scope="module")
def sim():
    # raters clearly better than chance, so that short chains converge (no warning to filter)
    return pyrater.simulate("dawid_skene", n_items=200, n_raters=5, n_categories=3, seed=3, beta=1 + 8 * np.eye(3))


def test_every_method_argument_has_a_test_value():
    assert set(VALUES) == set(METHOD_ARGUMENTS)


UNUSED = [(m, name) for name, (users, _) in sorted(METHOD_ARGUMENTS.items()) for m in METHODS if m not in users]


@pytest.mark.parametrize("method, name", UNUSED, ids=[f"{m}-{n}" for m, n in UNUSED])
def test_an_argument_the_method_does_not_use_is_refused_before_any_work(sim, method, name):
    users, _ = METHOD_ARGUMENTS[name]
    taken = " and ".join(f"method={m!r}" for m in users)
    with pytest.raises(ValueError, match=rf"^{name}=.* is not used by method={method!r}; it applies to {taken}$"):
        pyrater.fit(sim.data, "dawid_skene", method=method, **{name: VALUES[name]})


def test_a_method_that_cannot_fit_the_family_is_named(sim):
    with pytest.raises(ValueError, match="cannot be fitted by method='em'; fit it with method='mcmc'"):
        pyrater.fit(sim.data, "hierarchical", method="em")


@pytest.mark.parametrize("as_frame", [False, True], ids=["RatingData", "DataFrame"])
def test_a_misspelt_argument_is_named_with_its_likely_meaning(sim, as_frame):
    data = sim.data.to_long() if as_frame else sim.data
    with pytest.raises(
        TypeError, match=r"^pyrater.fit got unknown argument\(s\) 'chian' \(did you mean 'chains'\?\)"
    ) as err:
        pyrater.fit(data, "dawid_skene", method="gibbs", chian=2)
    # a DataFrame's extra arguments go to its reader, whose options are listed; a RatingData has no reader
    assert ("reader's options: item, rater, rating, categories" in str(err.value)) is as_frame


def test_an_argument_of_em_given_to_fit_points_to_em(sim):
    with pytest.raises(TypeError, match=r"'max_iter' \(an argument of pyrater.em, which pyrater.fit does not pass on"):
        pyrater.fit(sim.data, "dawid_skene", method="em", max_iter=10)


def test_reader_options_with_a_rating_data_are_refused_and_with_a_frame_are_used(sim):
    with pytest.raises(TypeError, match="are for reading a DataFrame, but data is already a RatingData"):
        pyrater.fit(sim.data, "dawid_skene", method="em", categories=[0, 1, 2])
    frame = sim.data.to_long().rename(columns={"item": "id"})
    by_frame = pyrater.fit(frame, "dawid_skene", method="em", seed=1, item="id")
    by_data = pyrater.fit(sim.data, "dawid_skene", method="em", seed=1)
    np.testing.assert_allclose(by_frame.pi, by_data.pi, rtol=1e-12)


def test_auto_refuses_an_unknown_argument_before_fitting_any_candidate(sim, monkeypatch):
    def no_fit(*args, **kwargs):
        raise AssertionError("a candidate was fitted")

    monkeypatch.setattr(pyrater.fitting, "_fit_auto", no_fit)
    with pytest.raises(TypeError, match=r"'candidate' \(did you mean 'candidates'\?\)"):
        pyrater.fit(sim.data, "auto", candidate=["one_coin"])


def test_agreement_names_a_misspelt_argument(sim):
    with pytest.raises(
        TypeError, match=r"^pyrater.agreement got unknown argument\(s\) 'levl' \(did you mean 'level'\?\)"
    ):
        pyrater.agreement(sim.data, levl="ordinal")


@pytest.mark.parametrize("method", ["em", "gibbs", pytest.param("optimize", marks=pytest.mark.stan)])
def test_data_with_no_item_rated_twice_are_said_to_teach_nothing_about_the_raters(method):
    """Said once, by every method (the optimiser's EM start keeps its own warnings to itself)."""
    rng = np.random.default_rng(0)
    once = pyrater.RatingData.from_long(
        pd.DataFrame({"item": range(66), "rater": "dr_a", "rating": rng.integers(1, 4, 66)})
    )
    kwargs = {"chains": 2, "warmup": 20, "draws": 20, "progress": False} if method == "gibbs" else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pyrater.fit(once, "dawid_skene", method=method, seed=1, **kwargs)
    said = [str(w.message) for w in caught if "no item has more than one rating" in str(w.message)]
    assert said == [
        "no item has more than one rating (66 ratings of 66 items by 1 rater): the data cannot show how "
        "the raters err, so the error matrices and the classes follow the priors; each item needs two or "
        "more ratings (by different raters, or repeated) for a rating model to learn from"
    ]
    twice = pyrater.RatingData.from_long(  # one item rated twice is enough to be quiet about it
        pd.DataFrame({"item": [*range(66), 0], "rater": "dr_a", "rating": [*rng.integers(1, 4, 66), 1]})
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pyrater.fit(twice, "dawid_skene", method=method, seed=1, **kwargs)
    assert not [w for w in caught if "no item has more than one rating" in str(w.message)]


@pytest.mark.parametrize("seed", [-1, 2**31, 1.5, True, "1"])
@pytest.mark.parametrize("method", ["em", "gibbs"])
def test_one_seed_rule_for_every_method(sim, method, seed):
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*31\) or None"):
        pyrater.fit(sim.data, method=method, seed=seed)


def test_the_largest_seed_is_accepted_by_every_native_method(sim):
    for method in ("em", "gibbs"):
        kwargs = {"chains": 1, "warmup": 5, "draws": 5} if method == "gibbs" else {}
        with pytest.warns(RuntimeWarning) if method == "gibbs" else _no_warning():
            pyrater.fit(sim.data, method=method, seed=2**31 - 1, progress=False, **kwargs)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_samplers_and_em_take_progress(sim, capsys):
    """progress=False prints nothing; the bar appears only for steps longer than two seconds."""
    pyrater.fit(sim.data, method="gibbs", chains=2, warmup=200, draws=1000, seed=1, progress=False)
    pyrater.fit(sim.data, method="em", seed=1, progress=False)
    pyrater.em(sim.data, seed=1, progress=True, method="ml")  # quick: below the bar's delay, so silent too
    assert capsys.readouterr().err == ""


def test_score_accepts_what_calibrate_accepts(sim):
    fit = pyrater.em(sim.data, method="map", seed=1)
    gold = sim.truth
    from_fit = pyrater.score(fit, gold)
    from_frame = pyrater.score(fit.class_probabilities(), gold)
    assert from_fit == from_frame and from_fit["n"] == sim.data.n_items
    mv = pyrater.majority_vote(sim.data)
    assert pyrater.score(mv, gold) == pyrater.score(mv.class_probabilities(), gold)
    with pytest.raises(TypeError, match="a fit with class_probabilities"):
        pyrater.score(np.ones((3, 2)) / 2, gold)


def test_gibbs_diagnostics_have_no_nuts_fields(sim):
    fit = pyrater.fit(sim.data, method="gibbs", chains=2, warmup=200, draws=1000, seed=2, progress=False)
    table = fit.mcmc_diagnostics(warn=False)
    assert "label_switching" in table.attrs and "max_rhat" in table.attrs
    assert not {"divergences", "max_tree_depth_hits"} & set(table.attrs)
    assert "divergences" not in fit.summary().info


def test_nuts_diagnostics_report_divergences_and_tree_depth():
    from pyrater.fits import MCMCFit

    sim = pyrater.simulate("dawid_skene", n_items=30, n_raters=3, n_categories=2, seed=1)
    rng = np.random.default_rng(0)
    C, S, J, K = 2, 50, 3, 2
    theta = rng.dirichlet([5, 1], size=(C, S, J, K))
    draws = {"pi": rng.dirichlet([2, 2], size=(C, S)), "theta": theta}
    stats = {"diverging": np.zeros((C, S)), "tree_depth": np.full((C, S), 10)}
    fit = MCMCFit(sim.data, pyrater.DawidSkene(), {}, draws, stats, None, "pystan")
    with pytest.warns(RuntimeWarning, match="100 transitions hit the maximum tree depth"):
        table = fit.mcmc_diagnostics()
    assert table.attrs["divergences"] == 0 and table.attrs["max_tree_depth_hits"] == C * S
    # every fit's repr is one line, as EMFit's, not its arrays (a notebook cell that shows a fit)
    assert repr(fit) == "MCMCFit(Dawid-Skene, engine='pystan', chains=2, draws=50, items=30, raters=3, K=2)"


def test_a_gibbs_fit_shows_itself_in_one_line(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains
        fit = pyrater.fit(sim.data, method="gibbs", chains=2, warmup=20, draws=30, seed=2, progress=False)
    assert repr(fit) == "GibbsFit(Dawid-Skene, engine='pyrater-gibbs', chains=2, draws=30, items=200, raters=5, K=3)"


def test_plots_say_what_they_show(sim):
    fit = pyrater.fit(sim.data, method="gibbs", chains=3, warmup=200, draws=1000, seed=1, progress=False)
    fig = pyrater.plots.plot_class_probabilities(fit, n=7)
    assert fig.axes[0].get_title() == "Class probabilities of the 7 least certain items (highest entropy first)"
    items = list(sim.data.unit_labels[:3])
    fig = pyrater.plots.plot_class_probabilities(fit, items=items)
    assert fig.axes[0].get_title() == "Class probabilities of 3 chosen items"
    # K = 3 categories and 3 chains: the legends must tell chains (line styles) from categories (colours)
    fig = pyrater.plots.plot_trace(fit)
    cats = [str(c) for c in sim.data.categories]
    if _arviz.is_datatree_line():
        labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        assert labels == ["chain 0", "chain 1", "chain 2"] + [f"pi[{c}]" for c in cats]
        handles = fig.legends[0].legend_handles
        assert len({h.get_linestyle() for h in handles[:3]}) == 3 and len({h.get_color() for h in handles[3:]}) == 3
    else:  # ArviZ 0.x's compact trace names both itself
        legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes if ax.get_legend()]
        assert cats in legends and ["0", "1", "2"] in legends
    fig = pyrater.plots.plot_rank(fig_fit := fit)
    assert fig.get_layout_engine() is not None and fig_fit is fit  # titles are laid out, not clipped


def test_cli_help_loads_no_fitting_stack():
    code = (
        "import sys, contextlib, io\n"
        "from pyrater import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        cli.main(['--help'])\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('xarray', 'numba', 'arviz', 'matplotlib', 'scipy.stats', 'stan', 'cmdstanpy')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
