"""The tune-service benchmark suite: ``python bench/run.py [--quick] [NAME ...]`` (or ``python -m bench``)."""
