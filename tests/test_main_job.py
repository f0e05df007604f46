"""``make run``'s grid shows what metabench is for: MAML-TRPO's post-adaptation return beats its
own pre-adaptation return, multitask PPO (the best policy that does not adapt) and NOP.

It runs the Makefile's own ``run`` command (about 5 minutes on 2 cores), so it is not part of
``make test``: ``make test-main-job`` runs it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from metabench.analysis.resultfile import collect_results
from metabench.analysis.stats import summarize
from metabench.cli import main
from tests.factories import ROOT

MAKEFILE = ROOT / "Makefile"


def make_run_arguments(results: Path) -> list[str]:
    """The ``metabench`` arguments of the Makefile's ``run`` target, writing to ``results``."""
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", MAKEFILE.read_text(), re.MULTILINE)
    assert recipe is not None, "the Makefile has no run target"
    command = shlex.split(recipe.group(1).replace("\\\n", " "))
    args = command[command.index("$(BIN)/metabench") + 1 :]
    args[args.index("--results") + 1] = str(results)
    return args


def test_make_run_arguments_come_from_the_makefile(tmp_path: Path) -> None:
    args = make_run_arguments(tmp_path)
    assert args[0] == "bench" and args[args.index("--results") + 1] == str(tmp_path)
    assert {"maml-trpo", "multitask", "nop"} <= set(args)


@pytest.mark.mainjob
def test_the_quick_grid_shows_maml_adapting_above_the_floors(tmp_path: Path) -> None:
    assert main(make_run_arguments(tmp_path)) == 0
    summaries = summarize(result for _, result in collect_results(tmp_path))
    by_algorithm = {summary.algorithm: summary for summary in summaries}
    maml, multitask, nop = (by_algorithm[name] for name in ("maml-trpo", "multitask", "nop"))
    assert maml.adaptation_gain is not None and maml.adaptation_gain.low > 0, "MAML did not adapt"
    assert maml.test_return.mean > multitask.test_return.mean, "multitask beat adapted MAML"
    assert maml.test_return.low > nop.test_return.high, "NOP's interval reaches adapted MAML's"
