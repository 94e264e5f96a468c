"""The blocked Gibbs sampler for the conjugate Dawid-Skene models (:func:`gibbs`)."""

from __future__ import annotations

from .sampler import GIBBS_ENGINE, gibbs

__all__ = ["gibbs", "GIBBS_ENGINE"]
