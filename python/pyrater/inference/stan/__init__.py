"""The Stan programs run by cmdstanpy or pystan: engines, the data builder and the fit runner."""
