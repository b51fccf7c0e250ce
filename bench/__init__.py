"""Benchmarks and evaluations. Run `python -m bench` (or `make bench`)."""
