"""Runs and grids, and the pieces that make them trustworthy: checkpoints, provenance, status; the
result files they write are read by :mod:`metabench.analysis`."""
