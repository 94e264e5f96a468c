"""Native (numpy/numba) inference for the Dawid-Skene family: the one home of EM and the Gibbs sampler.

Modules
-------
em
    Maximum likelihood / MAP by EM (:func:`pyrater.em`), with the count
    compression and the scipy and fused-numba backends.
_fused
    The fused numba EM iteration and the helpers that compile kernels with
    SLP vectorisation (also used by the Gibbs kernel).
gibbs, _gibbs_kernel
    The blocked Gibbs sampler (``pyrater.fit(..., method="gibbs")``) and its
    compiled chain.
priors
    The conjugate priors (exactly the Stan programs') and their log density.
results
    :class:`~pyrater.native.results.GibbsFit` and the label-switching check.
diagnostics
    Rank-normalised Rhat and bulk/tail ESS vectorised over parameters (equal
    to ArviZ's).

Both samplers and EM read the per-unit count matrix
(:attr:`pyrater.RatingData.counts`) and share the class-posterior kernel of
:mod:`pyrater.kernel`.
"""
