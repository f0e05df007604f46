"""Shared fixtures: metabench registers its Gymnasium ids on import."""

import metabench  # noqa: F401 - registers the metabench/* ids
