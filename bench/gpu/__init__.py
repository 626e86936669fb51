"""GPU benchmarks (mixed precision, warm gangs with CUDA) and gpu_checks.sh, the GPU checks in one run."""
