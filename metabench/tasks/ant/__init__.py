"""Ant-Dir and Ant-Goal, the ant tasks of PEARL and VariBAD, on Gymnasium's v5 Ant model
(:mod:`~metabench.tasks.ant.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"``, ...);
:mod:`metabench.tasks.ant.envs` says where they differ. Nothing loads with the package: MuJoCo
loads with the envs' module.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # oyster's meta-test: 600 steps of 200, 3 episodes. MAML's meta-batch of 800 envs steps
        # 1.86x as fast sharded over 2 processes as in one, at 70% of the bare physics'
        # throughput (scripts/bench_sampler_classic.py): a batched env could gain at most 1.43x.
        name: TaskEnvDeclaration(f"metabench.tasks.ant.envs:{name}Env", 3, steps_in_workers=True)
        for name in ("AntDir", "AntGoal")
    }
)
