"""Humanoid-Dir, the humanoid task of PEARL and VariBAD, on Gymnasium's v5 Humanoid model
(:mod:`~metabench.tasks.humanoid.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"`` or
``"varibad"``); :mod:`metabench.tasks.humanoid.envs` says where they differ. Nothing loads with
the package: MuJoCo loads with the envs' module.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    # oyster's meta-test: 600 steps of 200, 3 episodes. A meta-batch of 400 envs steps 1.87x as
    # fast sharded over 2 processes as in one, as fast as the bare physics
    # (scripts/bench_sampler_classic.py): a batched env would gain nothing.
    envs={
        "HumanoidDir": TaskEnvDeclaration(
            "metabench.tasks.humanoid.envs:HumanoidDirEnv", 3, steps_in_workers=True
        )
    }
)
