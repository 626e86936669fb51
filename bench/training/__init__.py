"""Training benchmarks: the shared train loop against a bare DDP loop, and DDP inside a trial."""
