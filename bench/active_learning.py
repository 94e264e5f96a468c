"""Which item to rate next, and by whom: a simulation study of :func:`pyrater.decisions.next_ratings`.

Every run starts from 2 ratings per item, spends a budget of new ratings in
rounds, refits ``pyrater.em(..., method="map")`` after each round and scores
the class probabilities against the truth (accuracy, expected calibration
error, Brier score, log-loss).  Strategies:

================  ===========================================================
random            uniformly random (item, rater) pairs not yet rated
least_confident   the items with the smallest top class probability (one new
                  rating each per round), each given to a random rater who
                  has not rated it: "least-confident item with any rater"
lc_best_rater     the same items, each given to the available rater with the
                  highest estimated accuracy (an ablation: item choice by
                  uncertainty, rater choice by skill)
next_ratings      :func:`pyrater.decisions.next_ratings` with the round's budget
                  (default objective: expected information gain)
next_ratings_     the same with ``objective="error"`` (expected reduction of
error             the misclassification probability)
next_ratings_     the default objective with ``rater_uncertainty="none"``: the
point             EM estimate of every error matrix taken as exact (an
                  ablation; the default draws each rater's matrix from its
                  conjugate Dirichlet posterior given the class probabilities)
================  ===========================================================

Simulated data (scenario ``unequal``): Dawid-Skene, K = 3 classes with
prevalence (0.5, 0.3, 0.2), 10 raters with accuracies 0.90, 0.85, 0.80, 0.75,
0.70, 0.60, 0.55, 0.50, 0.45, 0.40 (diagonal of theta; the off-diagonal errors
are Dirichlet(2) shares of the rest), 2 random raters per item to start; 2000
items, 10 rounds of 400 ratings.  EM MAP uses rater's default priors, with the
off-diagonal Dirichlet parameters raised to 1 for K >= 5 (where they fall
below 1 and MAP has no mode).
Ratings revealed on request come from the same uniform numbers for every
strategy (common random numbers): asking the same rater about the same item
gives the same answer in every arm.  Scenario ``capped`` limits every rater to
80 ratings per round (20% of the round), in every strategy; scenario ``equal``
gives all raters accuracy 0.65 (choosing the rater cannot matter there).

Targets (issue 29, scenario ``unequal``, means over seeds): next_ratings
reaches random choice's final accuracy with at most 60% of random's budget,
and beats least_confident at the final budget by at least 0.01.

Real sets (``--replay``): every categorical gold set in ``../shared/data``
with at least 4 ratings per item on average.  Two ratings per item (random)
are shown at the start; the rest are held back and revealed on request;
strategies may ask only for held-back ratings (``next_ratings(...,
candidates=pool)``).  Accuracy on the gold items, 5 rounds.

Usage::

    python bench/active_learning.py                    # simulation + replay + speed, writes RESULTS_active.md
    python bench/active_learning.py --quick            # a small version (CI smoke)
    python bench/active_learning.py --no-replay --no-speed
    python bench/active_learning.py --report-only      # rebuild RESULTS_active.md from the CSVs

The per-round CSVs (active_sim.csv, active_replay.csv, active_speed.csv) go to
``--out-dir`` (default: ``$PYRATER_BENCH_OUT`` or a folder in the system's
temporary directory); RESULTS_active.md, next to this script, holds every table.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pyrater
from pyrater.checking.scoring import score_arrays
from pyrater.decisions import next_ratings

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))
DEFAULT_OUT = Path(os.environ.get("PYRATER_BENCH_OUT", Path(tempfile.gettempdir()) / "pyrater_active"))
STRATEGIES = ("random", "least_confident", "lc_best_rater", "next_ratings", "next_ratings_error", "next_ratings_point")
NUMERIC = ("snow_emotion_numeric",)  # numeric scores: not a categorical model


# ------------------------------------------------------------------ state of one run
class Design:
    """The ratings seen so far (codes), the pool that can still be asked, and how answers are revealed."""

    def __init__(self, item, rater, rating, I: int, J: int, K: int, reveal: Callable, pool: np.ndarray | None):
        self.item, self.rater, self.rating = list(item), list(rater), list(rating)
        self.I, self.J, self.K = I, J, K
        self.reveal = reveal
        self.rated = np.zeros((I, J), dtype=bool)
        self.rated[np.asarray(item), np.asarray(rater)] = True
        # pool: (I, J) bool of pairs that can be asked (None: every unrated pair)
        self.pool = pool

    def askable(self) -> np.ndarray:
        """(I, J) bool: pairs that can be asked now."""
        return (~self.rated) if self.pool is None else (self.pool & ~self.rated)

    def add(self, items: np.ndarray, raters: np.ndarray) -> None:
        ok = self.askable()[items, raters]
        if not ok.all():
            raise RuntimeError("a strategy asked for a pair that cannot be asked")
        ratings = self.reveal(items, raters)
        self.item += items.tolist()
        self.rater += raters.tolist()
        self.rating += ratings.tolist()
        self.rated[items, raters] = True

    def data(self) -> pyrater.RatingData:
        return pyrater.RatingData.from_codes(
            np.asarray(self.item),
            np.asarray(self.rater),
            np.asarray(self.rating),
            n_categories=self.K,
            n_items=self.I,
            n_raters=self.J,
        )


def map_model(K: int):
    """Dawid-Skene with rater's default priors, off-diagonal beta raised to 1 where it is below
    (K >= 5: 3.2 / (K - 1) < 1, where MAP by EM has no mode)."""
    from pyrater.models import default_beta

    beta = default_beta(K)
    return pyrater.DawidSkene(beta=np.maximum(beta, 1.0)) if beta.min() < 1 else "dawid_skene"


def refit(design: Design):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyrater.em(design.data(), map_model(design.K), method="map", seed=0)


# ------------------------------------------------------------------ strategies
def _capped(items: np.ndarray, raters: np.ndarray, n: int, cap: int | None) -> np.ndarray:
    """Indices of the first ``n`` pairs (in the given order) keeping every rater within ``cap``."""
    if cap is None:
        return np.arange(min(n, items.size))
    used: dict[int, int] = {}
    keep = []
    for t, j in enumerate(raters.tolist()):
        if used.get(j, 0) < cap:
            keep.append(t)
            used[j] = used.get(j, 0) + 1
            if len(keep) == n:
                break
    return np.asarray(keep, dtype=np.int64)


def choose_random(fit, design: Design, n: int, rng: np.random.Generator, cap: int | None = None):
    flat = rng.permutation(np.flatnonzero(design.askable().ravel()))
    keep = _capped(flat // design.J, flat % design.J, n, cap)
    pick = flat[keep]
    return pick // design.J, pick % design.J


def _least_confident_items(fit, design: Design, n: int, rng: np.random.Generator) -> np.ndarray:
    probs = fit.class_probabilities().to_numpy()
    top = probs.max(axis=1)
    has = design.askable().any(axis=1)
    order = np.lexsort((rng.random(design.I), top))  # ties broken at random
    order = order[has[order]]
    return order[:n]


def _assign(items: np.ndarray, design: Design, n: int, cap: int | None, pick_rater) -> tuple[np.ndarray, np.ndarray]:
    """Give items (in order) a rater each with ``pick_rater(options)``, raters within ``cap``; ``n`` pairs."""
    ask = design.askable()
    used = np.zeros(design.J, dtype=np.int64)
    out_i, out_j = [], []
    for i in items:
        options = np.flatnonzero(ask[i] & ((used < cap) if cap is not None else True))
        if options.size == 0:
            continue
        j = pick_rater(options)
        used[j] += 1
        out_i.append(i)
        out_j.append(j)
        if len(out_i) == n:
            break
    return np.asarray(out_i, dtype=np.int64), np.asarray(out_j, dtype=np.int64)


def choose_least_confident(fit, design: Design, n: int, rng: np.random.Generator, cap: int | None = None):
    items = _least_confident_items(fit, design, design.I, rng)
    return _assign(items, design, n, cap, lambda options: int(rng.choice(options)))


def choose_lc_best_rater(fit, design: Design, n: int, rng: np.random.Generator, cap: int | None = None):
    items = _least_confident_items(fit, design, design.I, rng)
    pi = np.asarray(fit.point_estimate("pi"))
    theta = np.asarray(fit.point_estimate("theta"))
    acc = np.einsum("k,jkk->j", pi, theta)  # estimated accuracy of each rater
    return _assign(items, design, n, cap, lambda options: int(options[np.argmax(acc[options])]))


def make_next_ratings(objective: str = "information", rater_uncertainty: str = "auto"):
    def choose(fit, design: Design, n: int, rng: np.random.Generator, cap: int | None = None):
        cand = None
        if design.pool is not None:
            ii, jj = np.nonzero(design.askable())
            cand = pd.DataFrame({"item": ii + 1, "rater": jj + 1})  # from_codes labels are 1-based
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            plan = next_ratings(
                fit,
                n,
                candidates=cand,
                max_per_rater=cap,
                objective=objective,
                rater_uncertainty=rater_uncertainty,
                seed=int(rng.integers(2**31)),
            )
        return plan["item"].to_numpy(dtype=np.int64) - 1, plan["rater"].to_numpy(dtype=np.int64) - 1

    return choose


def strategy(name: str, cap: int | None = None):
    """The strategy ``name`` as ``choose(fit, design, n, rng)``; ``cap``: ratings per rater per round."""
    fn = {
        "random": choose_random,
        "least_confident": choose_least_confident,
        "lc_best_rater": choose_lc_best_rater,
        "next_ratings": make_next_ratings(),
        "next_ratings_error": make_next_ratings("error"),
        "next_ratings_point": make_next_ratings(rater_uncertainty="none"),
    }[name]
    return lambda fit, design, n, rng: fn(fit, design, n, rng, cap)


def run_loop(
    make_design: Callable[[], Design],
    choose: Callable,
    truth: np.ndarray,
    eval_items: np.ndarray,
    rounds: int,
    per_round: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Fit, score, choose, reveal; ``rounds`` times, then a final fit and score."""
    design = make_design()
    rng = np.random.default_rng(seed)
    rows = []
    spent = 0
    for r in range(rounds + 1):
        t0 = time.perf_counter()
        fit = refit(design)
        t_fit = time.perf_counter() - t0
        probs = fit.class_probabilities().to_numpy()[eval_items]
        s = score_arrays(truth, probs)
        row = {"round": r, "budget": spent, "n_ratings": len(design.item), **s, "fit_s": t_fit, "choose_s": np.nan}
        if r < rounds:
            t0 = time.perf_counter()
            items, raters = choose(fit, design, per_round, rng)
            row["choose_s"] = time.perf_counter() - t0
            design.add(np.asarray(items), np.asarray(raters))
            spent += len(items)
        rows.append(row)
    return rows


# ------------------------------------------------------------------ simulated data
SCENARIOS = {
    "unequal": {"acc": (0.90, 0.85, 0.80, 0.75, 0.70, 0.60, 0.55, 0.50, 0.45, 0.40), "cap": None},
    "capped": {"acc": (0.90, 0.85, 0.80, 0.75, 0.70, 0.60, 0.55, 0.50, 0.45, 0.40), "cap": 0.2},
    "equal": {"acc": (0.65,) * 10, "cap": None},
}
PI = (0.5, 0.3, 0.2)


def make_theta(acc: Sequence[float], K: int, rng: np.random.Generator) -> np.ndarray:
    J = len(acc)
    theta = np.zeros((J, K, K))
    for j, a in enumerate(acc):
        for k in range(K):
            off = rng.dirichlet(np.full(K - 1, 2.0)) * (1 - a)
            theta[j, k] = np.insert(off, k, a)
    return theta


def simulate_study(
    n_items: int = 2000,
    rounds: int = 10,
    per_round: int = 400,
    seeds: Sequence[int] = (0, 1, 2),
    strategies: Sequence[str] = STRATEGIES,
    scenario: str = "unequal",
    K: int = 3,
) -> pd.DataFrame:
    """The simulation study; one row per (seed, strategy, round)."""
    spec = SCENARIOS[scenario]
    acc = spec["acc"]
    J = len(acc)
    out = []
    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        theta = make_theta(acc, K, rng)
        sim = pyrater.simulate(
            "dawid_skene",
            n_items,
            J,
            n_categories=K,
            raters_per_item=2,
            pi=np.array(PI),
            theta=theta,
            seed=int(rng.integers(2**31)),
        )
        z = np.asarray(sim.z)
        U = rng.random((n_items, J))  # common random numbers: the answer of rater j about item i
        cum = np.cumsum(theta, axis=2)  # (J, K, K)

        def reveal(items, raters, z=z, U=U, cum=cum):
            c = cum[raters, z[items]]  # (n, K)
            return np.minimum((U[items, raters][:, None] > c).sum(axis=1), K - 1)

        d0 = sim.data

        def make_design(d0=d0, reveal=reveal):
            return Design(d0.unit, d0.rater, d0.rating, n_items, J, K, reveal, None)

        cap = None if spec["cap"] is None else int(spec["cap"] * per_round)
        for name in strategies:
            rows = run_loop(make_design, strategy(name, cap), z, np.arange(n_items), rounds, per_round, seed)
            for row in rows:
                out.append({"scenario": scenario, "seed": seed, "strategy": name, **row})
            print(
                f"  {scenario} seed {seed} {name}: accuracy {rows[0]['accuracy']:.3f} -> {rows[-1]['accuracy']:.3f}",
                flush=True,
            )
    return pd.DataFrame(out)


def targets(df: pd.DataFrame) -> dict[str, Any]:
    """The two targets of issue 29 from the mean accuracy over seeds of one scenario."""
    m = df.groupby(["strategy", "budget"])["accuracy"].mean().unstack(0)
    total = m.index.max()
    final_random = m.loc[total, "random"]
    reach = m.index[m["next_ratings"] >= final_random - 1e-12]
    first = float(reach.min()) if len(reach) else np.nan
    # per seed, the same two quantities
    per_seed = []
    for seed, g in df.groupby("seed"):
        ms = g.pivot_table(index="budget", columns="strategy", values="accuracy")
        fr = ms.loc[total, "random"]
        rs = ms.index[ms["next_ratings"] >= fr - 1e-12]
        per_seed.append(
            {
                "seed": seed,
                "budget_share_to_reach_random_final": (float(rs.min()) / total) if len(rs) else np.nan,
                "final_gain_over_least_confident": ms.loc[total, "next_ratings"] - ms.loc[total, "least_confident"],
            }
        )
    return {
        "total_budget": int(total),
        "random_final_accuracy": float(final_random),
        "budget_to_reach": first,
        "budget_share": first / total,
        "final_next_ratings": float(m.loc[total, "next_ratings"]),
        "final_least_confident": float(m.loc[total, "least_confident"]),
        "gain_over_lc_final": float(m.loc[total, "next_ratings"] - m.loc[total, "least_confident"]),
        "min_gain_over_lc_any_budget>0": float((m["next_ratings"] - m["least_confident"]).loc[m.index > 0].min()),
        "per_seed": per_seed,
    }


# ------------------------------------------------------------------ real sets replayed
def list_replay_sets(data_dir: Path, min_per_item: float = 4.0) -> list[str]:
    if not Path(data_dir).is_dir():
        return []
    out = []
    for d in sorted(Path(data_dir).iterdir()):
        if not (
            d.is_dir() and (d / "ratings.csv").exists() and (d / "gold.csv").exists() and (d / "labels.csv").exists()
        ):
            continue
        if d.name in NUMERIC:
            continue
        r = pd.read_csv(d / "ratings.csv")
        if len(r) / r["item"].nunique() >= min_per_item:
            out.append(d.name)
    return out


def replay_study(
    name: str, data_dir: Path, seeds: Sequence[int], rounds: int = 5, strategies: Sequence[str] = STRATEGIES
) -> pd.DataFrame:
    d = Path(data_dir) / name
    ratings = pd.read_csv(d / "ratings.csv")
    gold = pd.read_csv(d / "gold.csv").set_index("item")["truth"]
    cats = sorted(pd.read_csv(d / "labels.csv")["rating"].unique())
    # one rating per (item, rater): a repeated pair keeps its first rating
    ratings = ratings.drop_duplicates(["item", "rater"])
    item_codes, item_labels = pd.factorize(ratings["item"], sort=True)
    rater_codes, _ = pd.factorize(ratings["rater"], sort=True)
    cat_index = pd.Index(cats)
    rating_codes = cat_index.get_indexer(ratings["rating"])
    I, J, K = len(item_labels), int(rater_codes.max()) + 1, len(cats)
    answer = np.full((I, J), -1, dtype=np.int64)
    answer[item_codes, rater_codes] = rating_codes
    gold = gold[gold.index.isin(item_labels)]
    eval_items = item_labels.get_indexer(gold.index)
    truth = cat_index.get_indexer(gold.to_numpy())
    per_item = len(ratings) / I
    budget_total = int(round(min(2.0, (per_item - 2) / 2) * I))
    per_round = max(1, budget_total // rounds)
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        # two random ratings of each item are seen at the start, the rest held back
        keys = rng.random(len(ratings))
        order = np.lexsort((keys, item_codes))
        rank = np.empty(len(ratings), dtype=np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(item_codes[order])) + 1]
        counts_per = np.diff(np.r_[starts, len(ratings)])
        rank[order] = np.arange(len(ratings)) - np.repeat(starts, counts_per)
        shown = rank < 2
        pool = answer >= 0

        def reveal(items, raters, answer=answer):
            return answer[items, raters]

        def make_design(shown=shown, pool=pool):
            return Design(item_codes[shown], rater_codes[shown], rating_codes[shown], I, J, K, reveal, pool)

        for s in strategies:
            t0 = time.perf_counter()
            rows = run_loop(make_design, strategy(s), truth, eval_items, rounds, per_round, seed)
            for row in rows:
                out.append(
                    {
                        "dataset": name,
                        "seed": seed,
                        "strategy": s,
                        "items": I,
                        "raters": J,
                        "K": K,
                        "ratings_per_item": per_item,
                        **row,
                    }
                )
            print(
                f"  {name} seed {seed} {s}: {rows[0]['accuracy']:.3f} -> {rows[-1]['accuracy']:.3f} "
                f"({time.perf_counter() - t0:.1f}s)",
                flush=True,
            )
    return pd.DataFrame(out)


# ------------------------------------------------------------------ speed
def speed_study(repeats: int = 3) -> pd.DataFrame:
    """Seconds for next_ratings on 10^5 items: EM fit (point) and Gibbs fit (draws)."""
    rows = []
    for J, K, budgets in ((20, 4, (1000, 10000)), (200, 5, (1000,))):
        sim = pyrater.simulate("dawid_skene", 100_000, J, n_categories=K, raters_per_item=3, seed=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = {"em_map": pyrater.em(sim.data, map_model(K), method="map", init="majority")}
            if J == 20:
                fits["gibbs (200 draws)"] = pyrater.fit(
                    sim.data, "dawid_skene", method="gibbs", draws=100, warmup=100, chains=2, seed=1
                )
        for fname, f in fits.items():
            f.class_probabilities()  # warm: the fit's own cache and xarray's imports are not next_ratings' cost
            f.point_estimate("theta")
            for budget in budgets:
                for kw_name, kw in (("default", {}), ("max_per_rater", {"max_per_rater": budget})):
                    times = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        plan = next_ratings(f, budget, **kw)
                        times.append(time.perf_counter() - t0)
                    rows.append(
                        {
                            "items": 100_000,
                            "raters": J,
                            "K": K,
                            "fit": fname,
                            "budget": budget,
                            "options": kw_name,
                            "n_draws": plan.attrs["n_draws"],
                            "items_scored": plan.attrs["items_scored"],
                            "distinct_items": plan["item"].nunique(),
                            "seconds_min": min(times),
                            "seconds_median": float(np.median(times)),
                        }
                    )
                    print(f"  speed {rows[-1]}", flush=True)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ report
def machine_state() -> str:
    try:
        load = os.getloadavg()
        load_s = f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    except OSError:  # pragma: no cover
        load_s = "load unknown"
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover
        pass
    import numba
    import scipy

    return (
        f"{model}, {os.cpu_count()} CPUs shared with other developers ({load_s}); Python {platform.python_version()}, "
        f"numpy {np.__version__}, scipy {scipy.__version__}, pandas {pd.__version__}, numba {numba.__version__}, "
        f"pyrater {pyrater.__version__}"
    )


def _table(df: pd.DataFrame, value: str, fmt: str = "{:.3f}") -> str:
    m = df.groupby(["budget", "strategy"])[value].mean().unstack(1)
    cols = [s for s in STRATEGIES if s in m.columns]
    lines = ["| budget | " + " | ".join(cols) + " |", "|---:|" + "---:|" * len(cols)]
    for b, row in m.iterrows():
        lines.append(f"| {int(b)} | " + " | ".join(fmt.format(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def write_report(out_dir: Path, meta: dict[str, str]) -> str:
    parts = ["# Active learning: which item to rate next, and by whom", ""]
    parts += [
        f"Script: `bench/active_learning.py`. {meta.get('when', '')}",
        "",
        f"Machine: {meta.get('machine', 'unknown')}.",
        "",
        f"Command: `{meta.get('command', '')}`",
        "",
    ]
    sim_path = out_dir / "active_sim.csv"
    if sim_path.exists():
        sim = pd.read_csv(sim_path)
        parts += [
            "## Simulated Dawid-Skene data",
            "",
            "2000 items, K = 3 (prevalence 0.5/0.3/0.2), 10 raters, 2 random ratings per item to start, "
            "10 rounds of 400 new ratings, EM MAP refit after every round; mean over "
            f"{sim['seed'].nunique()} seeds (data, error matrices and answers redrawn per seed). "
            "Accuracy = share of the 2000 items whose most probable class is the true one.",
            "",
        ]
        for scen, g in sim.groupby("scenario", sort=False):
            desc = {
                "unequal": "raters of unequal skill (accuracies 0.90, 0.85, 0.80, 0.75, 0.70, 0.60, 0.55, 0.50, 0.45, 0.40)",
                "capped": "the same raters, each limited to 80 ratings per round (20% of a round) in every strategy",
                "equal": "10 raters of equal skill (accuracy 0.65): only the choice of item can matter",
            }.get(scen, scen)
            parts += [
                f"### Scenario `{scen}`: {desc}",
                "",
                "Accuracy:",
                "",
                _table(g, "accuracy"),
                "",
                "Expected calibration error (15 bins, top label):",
                "",
                _table(g, "ece"),
                "",
                "Log-loss:",
                "",
                _table(g, "log_loss"),
                "",
            ]
            if {"random", "next_ratings", "least_confident"} <= set(g["strategy"]):
                t = targets(g)
                parts += [
                    f"- random's final accuracy (budget {t['total_budget']}): {t['random_final_accuracy']:.4f}; "
                    f"next_ratings first reaches it at budget {t['budget_to_reach']:.0f} = "
                    f"**{t['budget_share']:.0%} of random's budget** (target <= 60%).",
                    f"- final accuracy next_ratings {t['final_next_ratings']:.4f} vs least_confident "
                    f"{t['final_least_confident']:.4f}: **{100 * t['gain_over_lc_final']:+.2f} points** (target >= +1); "
                    f"smallest margin over least_confident at any budget > 0: {100 * t['min_gain_over_lc_any_budget>0']:+.2f} points.",
                    "- per seed: "
                    + "; ".join(
                        f"seed {p['seed']}: {p['budget_share_to_reach_random_final']:.0%} of the budget, "
                        f"{100 * p['final_gain_over_least_confident']:+.2f} points"
                        for p in t["per_seed"]
                    ),
                    "",
                ]
            ch = g.groupby("strategy")["choose_s"].mean()
            parts += [
                "Mean seconds to choose a round: "
                + ", ".join(f"{s} {ch[s]:.3f}" for s in STRATEGIES if s in ch)
                + f"; mean EM MAP refit {g['fit_s'].mean():.3f} s.",
                "",
            ]
    rep_path = out_dir / "active_replay.csv"
    if rep_path.exists():
        rep = pd.read_csv(rep_path)
        parts += [
            "## Real sets replayed",
            "",
            "Two random ratings per item shown at the start, the others held back and revealed on request; a "
            "strategy may ask only for held-back ratings. Budget: min(2, (ratings per item - 2) / 2) x items, in "
            f"{int(rep['round'].max())} rounds, EM MAP refit after each. "
            f"Accuracy on the gold items, mean over {rep['seed'].nunique()} seeds (which ratings are shown first).",
            "",
        ]
        last = rep[rep["round"] == rep.groupby("dataset")["round"].transform("max")]
        first = rep[rep["round"] == 0].groupby("dataset")["accuracy"].mean()
        full = rep.groupby("dataset")[["items", "raters", "K", "ratings_per_item"]].first()
        m = last.groupby(["dataset", "strategy"])["accuracy"].mean().unstack(1)
        cols = [s for s in STRATEGIES if s in m.columns]
        lines = [
            "| data set | items | raters | K | ratings/item | budget | start | " + " | ".join(cols) + " |",
            "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(cols),
        ]
        for ds, row in m.iterrows():
            f = full.loc[ds]
            b = int(last[last["dataset"] == ds]["budget"].iloc[0])
            best = max(row[c] for c in cols)
            cells = [(f"**{row[c]:.3f}**" if row[c] == best else f"{row[c]:.3f}") for c in cols]
            lines.append(
                f"| {ds} | {int(f['items'])} | {int(f['raters'])} | {int(f['K'])} | {f['ratings_per_item']:.1f} | {b} | "
                f"{first[ds]:.3f} | " + " | ".join(cells) + " |"
            )
        mean = m.mean()
        lines.append(
            "| **mean** | | | | | | " + f"{first.mean():.3f} | " + " | ".join(f"{mean[c]:.3f}" for c in cols) + " |"
        )
        wins = (m["next_ratings"] >= m[[c for c in cols if c != "next_ratings"]].max(axis=1) - 1e-12).sum()
        parts += [
            "Final accuracy:",
            "",
            "\n".join(lines),
            "",
            f"next_ratings is best or tied on {wins} of {len(m)} sets.",
            "",
        ]
    sp_path = out_dir / "active_speed.csv"
    if sp_path.exists():
        sp = pd.read_csv(sp_path)
        parts += [
            "## Speed of next_ratings at 10^5 items",
            "",
            "Simulated DS data, 3 ratings per item; one thread (`NUMBA_NUM_THREADS=OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1`); "
            "the fit's class probabilities computed before timing. `max_per_rater` set to the budget turns off the "
            "skipping of low-entropy items (every item is scored).",
            "",
            _markdown(sp),
            "",
        ]
    text = "\n".join(parts)
    (HERE / "RESULTS_active.md").write_text(text)
    return text


def _markdown(df: pd.DataFrame) -> str:
    """A DataFrame as a markdown table (numbers to 3 significant digits)."""

    def cell(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--replay-sets", nargs="*", default=None)
    ap.add_argument("--replay-seeds", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="where the CSVs go")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "active_meta.txt"
    if not args.report_only:
        meta = {
            "machine": machine_state(),
            "when": time.strftime("Run on %Y-%m-%d %H:%M UTC.", time.gmtime()),
            "command": " ".join(["python bench/active_learning.py", *(argv if argv is not None else sys.argv[1:])]),
        }
        meta_path.write_text("\n".join(f"{k}\t{v}" for k, v in meta.items()))
        if not args.no_sim:
            frames = []
            for scen in args.scenarios:
                kw = dict(n_items=400, rounds=4, per_round=80) if args.quick else {}
                frames.append(simulate_study(seeds=range(args.seeds), scenario=scen, **kw))
            pd.concat(frames).to_csv(out / "active_sim.csv", index=False)
        if not args.no_replay:
            sets = args.replay_sets if args.replay_sets is not None else list_replay_sets(args.data_dir)
            if not sets:
                print(f"no replay data under {args.data_dir}: skipped", flush=True)
            frames = []
            for name in sets:
                try:
                    rounds = 3 if args.quick else 5
                    frames.append(replay_study(name, args.data_dir, seeds=range(args.replay_seeds), rounds=rounds))
                except Exception as exc:  # one data set's failure is reported, not fatal
                    print(f"  {name}: skipped ({type(exc).__name__}: {exc})", flush=True)
                if frames:  # written after every data set
                    pd.concat(frames).to_csv(out / "active_replay.csv", index=False)
        if not args.no_speed:
            speed_study(repeats=1 if args.quick else 3).to_csv(out / "active_speed.csv", index=False)
    meta = dict(line.split("\t", 1) for line in meta_path.read_text().splitlines()) if meta_path.exists() else {}
    print(write_report(out, meta))


if __name__ == "__main__":
    main()
