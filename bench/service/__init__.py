"""Service benchmarks: CLI start-up, trial and sweep overhead, warm gangs, utilisation, soak and load."""
