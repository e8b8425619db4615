"""Benchmarks of issue 7: run with `sudo bash tests/benchmarks/run.sh` (see docs/benchmarks.md)."""
