"""Meta-test a run's checkpoint with sampled test episodes where its algorithm takes the mode.

A check of what the mode costs: everything else is the run's own meta-test (``load_run``), on
``--test-tasks`` of its test tasks (the first of each class, as ``metabench evaluate``). Prints
the return and success rate per episode of the trial::

    .venv/bin/python scripts/sampled_test_episodes.py RUN_DIR --test-tasks 20
"""

from __future__ import annotations

import argparse
import json

from metabench.errors import RunError
from metabench.harness.loading import load_run, set_test_actions
from metabench.records import MetaTestRecord


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a directory written by metabench train")
    parser.add_argument(
        "--test-tasks", type=int, default=None, help="N of the test tasks, the first of each class"
    )
    args = parser.parse_args()
    run = load_run(args.run_dir)
    try:
        set_test_actions(run.algorithm, "sample")
    except RunError as error:
        parser.error(str(error))
    result = run.evaluator(args.test_tasks).evaluate(run.algorithm, run.processes)
    aggregate = MetaTestRecord.of(result).to_json()["aggregate"]
    print(
        json.dumps(
            {
                "n_tasks": aggregate["n_tasks"],
                "return_per_episode": [round(x, 1) for x in aggregate["return_per_episode"]],
                "success_rate_per_episode": aggregate.get("success_rate_per_episode"),
            }
        )
    )


if __name__ == "__main__":
    main()
