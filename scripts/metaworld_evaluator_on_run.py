"""Meta-test a run's checkpoint with Meta-World's own evaluator, as Meta-World+ calls it.

``metaworld.evaluation.metalearning_evaluation`` through :class:`MetaWorldAgent`, on the test
vector env Meta-World+ builds (``spawn_test``: ``meta_batch_size`` sub-envs, the first
``total_goals_per_task_test`` goals of each test class, terminate on success, reward v2), with
10 adaptation and 3 evaluation episodes and ``num_evals`` rounds covering every goal. Prints its
success rate and return beside Meta-World's count that metabench recorded for the same checkpoint
(``metaworld_success_rate``; Meta-World draws its own grouping of goals and its own random streams,
so the two agree within noise, not to the digit)::

    .venv/bin/python scripts/metaworld_evaluator_on_run.py RUN_DIR
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym

from metabench.evaluation.metaworld_adapter import MetaWorldAgent
from metabench.harness.loading import load_run
from metabench.records import EvaluationRecord, RunResult

SETTINGS = {"ML10": (20, 40, 5), "ML45": (45, 45, 5), "ML1": (10, 50, 1)}
"""Meta-World+'s meta_batch_size, test goals per class and test classes (examples/meta_learning,
envs/metaworld.py ``evaluate_metalearning``)."""


def recorded_count(run_dir: Path) -> float | None:
    """Meta-World's count metabench recorded for the run's final meta-test, if any."""
    candidates = [run_dir / "result.json", *sorted(run_dir.glob("evaluations/evaluate-*.json"))]
    for path in reversed(candidates):
        if path.exists():
            data = json.loads(path.read_text())
            metatest = (
                RunResult.from_json(data).metatest
                if path.name == "result.json"
                else EvaluationRecord.from_json(data).metatest
            )
            if metatest.success is not None and metatest.success.metaworld is not None:
                return metatest.success.metaworld.success_rate
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a directory written by metabench train")
    parser.add_argument("--seed", type=int, default=1, help="Meta-World's env seed")
    args = parser.parse_args()
    from metaworld.evaluation import metalearning_evaluation

    run = load_run(args.run_dir)
    benchmark = run.spec.metaworld
    if benchmark is None:
        parser.error(f"{run.spec.name} is not a Meta-World benchmark")
    meta_batch, goals, classes = SETTINGS[benchmark]
    kwargs = {"env_name": run.spec.env_kwargs["env_name"]} if benchmark == "ML1" else {}
    recurrent = "rl2" in run.config.algorithm
    envs = gym.make_vec(
        f"Meta-World/{benchmark}-test",
        meta_batch_size=meta_batch,
        total_tasks_per_cls=goals,
        max_episode_steps=run.spec.env_kwargs.get("horizon", 500),
        seed=args.seed,
        recurrent_info_in_obs=recurrent,
        vector_strategy="sync",
        **kwargs,
    )
    assert isinstance(envs, gym.vector.SyncVectorEnv)
    began = time.perf_counter()
    success, mean_return, per_class = metalearning_evaluation(
        MetaWorldAgent(run.algorithm, envs),
        envs,
        num_evals=classes * goals // meta_batch,
        adaptation_steps=1,
        adaptation_episodes=10,
        evaluation_episodes=3,
    )
    envs.close()
    print(
        json.dumps(
            {
                "metaworld_evaluator": {"success_rate": success, "mean_return": mean_return},
                "per_class": per_class,
                "metabench_recorded_count": recorded_count(args.run_dir),
                "wall_time_s": round(time.perf_counter() - began, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
