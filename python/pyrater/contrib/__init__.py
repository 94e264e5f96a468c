"""Comparison methods beside the core.

The bootstrap probit Dawid-Skene (:mod:`~pyrater.contrib.probit`), the
latent-graph latent class model (:mod:`~pyrater.contrib.lcm`) and the
binomial mixture (:mod:`~pyrater.contrib.mixture`).
"""
