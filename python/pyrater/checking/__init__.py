"""After the fit: posterior prediction and checks, LOO/WAIC and comparison, calibration, scoring, plots."""
