"""EM for the Dawid-Skene family: maximum likelihood and posterior mode (:func:`em`)."""

from __future__ import annotations

from .algorithm import EMConvergenceWarning, em

__all__ = ["em", "EMConvergenceWarning"]
