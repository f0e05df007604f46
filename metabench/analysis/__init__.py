"""Results analysis: what the result files say, read without torch.

- :mod:`~metabench.analysis.resultfile`: the result file (``result.json``), written, validated
  and read in one place;
- :mod:`~metabench.analysis.stats`: statistics over seeds (intervals, aggregates);
- :mod:`~metabench.analysis.comparisons`: algorithms compared on normalised scores;
- :mod:`~metabench.analysis.tables`: the summary tables (Markdown, CSV, JSON);
- :mod:`~metabench.analysis.periodic`: the meta-tests during training, as curves and best values;
- :mod:`~metabench.analysis.plots`: the figures;
- :mod:`~metabench.analysis.references`: the published numbers and settings beside ours;
- :mod:`~metabench.analysis.generated`: the files written from results, and their check;
- :mod:`~metabench.analysis.formatting`: how numbers, intervals and durations are written.

``metabench table`` and ``metabench plot`` import only this package (and the result format of
:mod:`metabench.evaluation.results`), so they start without loading torch; an import contract in
``pyproject.toml`` keeps it so.
"""
