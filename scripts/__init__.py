"""Measurement and analysis scripts, run as ``.venv/bin/python scripts/NAME.py``; the speed checks
in ``tests/benchmarks/`` import their measurements from here."""
