"""Walker-Rand-Params and Hopper-Rand-Params, the random-physics tasks of PEARL and VariBAD, on
Gymnasium's Walker2d and Hopper (:mod:`~metabench.tasks.rand_params.envs`).

oyster's and VariBAD's variants are the named protocols of each env (``protocol="oyster"`` or
``"varibad"``); :mod:`metabench.tasks.rand_params.envs` says where they differ, and
:mod:`metabench.tasks.rand_params.sampling` how a task's parameters are drawn. Nothing loads
with the package: MuJoCo loads with the envs' module.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # oyster's meta-test: 600 steps of 200, 3 episodes. A meta-batch of 400 envs steps 1.96x
        # (Walker) and 1.74x (Hopper) as fast sharded over 2 processes as in one, at 67% and 57%
        # of the bare physics' throughput (scripts/bench_sampler_classic.py).
        f"{robot}RandParams": TaskEnvDeclaration(
            f"metabench.tasks.rand_params.envs:{robot}RandParamsEnv", 3, steps_in_workers=True
        )
        for robot in ("Walker", "Hopper")
    }
)
