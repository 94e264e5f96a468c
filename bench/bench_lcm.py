"""Benchmark of pyrater.contrib.lcm: speed at scale and accuracy on replicated simulations.

Run from the repository root::

    python bench/bench_lcm.py            # both parts
    python bench/bench_lcm.py --speed    # only the timing
    python bench/bench_lcm.py --accuracy --replicates 20

Speed: 5,000 cases, 5,000 controls, K = 10 (default truth, silver standard on a quarter
of cases), wall time of ``LatentGraphLCM().fit`` (best and median of ``--repeats``).
Accuracy: K = 5, 500 cases, 500 controls, silver standard on a quarter of the cases,
``--replicates`` data sets; AUC of q(L) against the exact posterior at the truth,
mean |gamma_hat - gamma| and |delta_hat - delta|, edge recovery, with and without graph.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import scipy

from pyrater.contrib.lcm import LatentGraphLCM, auc, default_truth, exact_posterior, simulate_lcm


def speed(repeats: int) -> None:
    truth = default_truth(10)
    sim = simulate_lcm(5000, 5000, params=truth, silver_fraction=0.25, seed=0)
    rows = []
    for graph in (True, False):
        times, cpu, fit = [], [], None
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            fit = LatentGraphLCM(graph=graph).fit(sim.M, sim.case, sim.silver)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        iu = np.triu_indices(10, 1)
        P = fit.edge_prob_array[iu]
        ok = P[truth.D[iu] == 1].min() - P[truth.D[iu] == 0].max() > 0.5 if graph else None
        rows.append((graph, min(times), float(np.median(times)), min(cpu), fit.n_iter, fit.converged, ok))
    print("\n### Speed: 5,000 cases, 5,000 controls, K = 10\n")
    print("| model | wall best (s) | wall median (s) | CPU best (s) | iterations | converged | true graph separated |")
    print("|---|---|---|---|---|---|---|")
    for graph, best, med, cpu_best, n_iter, conv, ok in rows:
        name = "with graph" if graph else "without graph"
        print(f"| {name} | {best:.2f} | {med:.2f} | {cpu_best:.2f} | {n_iter} | {conv} | {'' if ok is None else ok} |")


def accuracy(replicates: int) -> None:
    truth = default_truth(5)
    iu = np.triu_indices(5, 1)
    true_edge = truth.D[iu] == 1
    res = {"graph": [], "nograph": []}
    gbias = []
    for seed in range(replicates):
        sim = simulate_lcm(500, 500, params=truth, silver_fraction=0.25, seed=seed)
        L = sim.L_cases.to_numpy()
        a_exact = auc(L, exact_posterior(sim.M, sim.case, sim.silver, params=truth).to_numpy())
        for key, graph in (("graph", True), ("nograph", False)):
            fit = LatentGraphLCM(graph=graph).fit(sim.M, sim.case, sim.silver)
            s = fit.summary()
            P = fit.edge_prob_array[iu]
            sep = P[true_edge].min() - P[~true_edge].max() if graph else np.nan
            res[key].append(
                [
                    a_exact - auc(L, fit.q_array),
                    np.abs(s.gamma_mean - truth.gamma).mean(),
                    np.abs(s.delta_mean - truth.delta).mean(),
                    fit.rho_mean,
                    sep > 0.5,
                    fit.n_iter,
                ]
            )
            if graph:
                gbias.append(s.gamma_mean.to_numpy() - truth.gamma)
    print(f"\n### Accuracy: K = 5, 500 cases, 500 controls, silver standard on 25% of cases, {replicates} data sets\n")
    print(
        "| model | AUC gap to exact (mean / max) | mean abs gamma error (mean / max) | mean abs delta error (max) "
        "| E[rho] (mean; truth 2.5) | true graph recovered | iterations (mean) |"
    )
    print("|---|---|---|---|---|---|---|")
    for key in ("graph", "nograph"):
        r = np.array(res[key], dtype=float)
        graph_ok = f"{int(r[:, 4].sum())}/{len(r)}" if key == "graph" else "n/a"
        print(
            f"| {'with graph' if key == 'graph' else 'without graph'} | {r[:, 0].mean():.4f} / {r[:, 0].max():.4f} "
            f"| {r[:, 1].mean():.3f} / {r[:, 1].max():.3f} | {r[:, 2].max():.3f} | {r[:, 3].mean():.2f} "
            f"| {graph_ok} | {r[:, 5].mean():.0f} |"
        )
    print(
        f"\nSigned gamma error per target (with graph, mean over data sets): {np.round(np.mean(gbias, 0), 3).tolist()}"
        f" for truth gamma = {truth.gamma.tolist()}; edges (T1,T2), (T3,T4)."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--replicates", type=int, default=20)
    args = ap.parse_args()
    both = not (args.speed or args.accuracy)
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
    if args.speed or both:
        speed(args.repeats)
    if args.accuracy or both:
        accuracy(args.replicates)


if __name__ == "__main__":
    main()
