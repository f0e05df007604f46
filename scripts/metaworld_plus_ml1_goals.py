"""Which goals Meta-World+'s ML1 runs train on: the goals held by the sub-envs of Meta-World's
registered ``Meta-World/ML1-train`` vector env, the env Meta-World+ trains on
(``MetaworldMetaLearningConfig.spawn``), against ``metaworld.ML1``'s training and test goals.

Runs in Meta-World+'s own environment (the Meta-World its ``uv.lock`` pins), not in metabench's::

    python scripts/metaworld_plus_ml1_goals.py [--env-name reach-v3] [--seed 1]

Meta-World registers ``ML1-train`` and ``ML1-test`` in a loop over the two splits with a lambda
that reads the loop variable when it is called, so both build the test split
(Farama-Foundation/Metaworld PR #573). Goals are compared as Meta-World's own task records
(``Task.data``, the same bytes for the same goal within a process).
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-name", default="reach-v3")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import gymnasium as gym
    import metaworld

    bench = metaworld.ML1(args.env_name, seed=args.seed)
    train = {task.data for task in bench.train_tasks}
    test = {task.data for task in bench.test_tasks}
    envs = gym.make_vec(
        "Meta-World/ML1-train", env_name=args.env_name, seed=args.seed, vector_strategy="sync",
        meta_batch_size=10, total_tasks_per_cls=50,
    )  # fmt: skip
    held = {task.data for env in envs.envs for task in env.get_wrapper_attr("tasks")}
    print(
        f"metaworld.ML1({args.env_name!r}, seed={args.seed}): {len(train)} training goals, "
        f"{len(test)} test goals, {len(train & test)} in both; Meta-World/ML1-train's sub-envs "
        f"hold {len(held)} goals: {len(held & train)} training, {len(held & test)} test"
    )
    envs.close()


if __name__ == "__main__":
    main()
