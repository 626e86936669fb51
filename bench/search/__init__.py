"""Search benchmarks: our searchers against random search and the peers, on problems with a known optimum."""
