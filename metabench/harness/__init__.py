"""Runs, result files and the pieces that make them trustworthy: atomic writes, provenance."""
