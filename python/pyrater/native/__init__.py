"""Native (numpy/numba) inference for the Dawid-Skene family: EM and its kernels."""
