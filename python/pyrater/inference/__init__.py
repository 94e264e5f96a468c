"""Inference methods: EM, the Gibbs sampler, Stan (both engines) and their Dask versions.

Each method reads a :class:`~pyrater.RatingData` compiled once into the
arrays it needs and returns a fit from :mod:`pyrater.fits`.
"""
