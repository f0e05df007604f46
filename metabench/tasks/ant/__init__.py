"""Ant-Dir and Ant-Goal, the ant tasks of PEARL and VariBAD, on Gymnasium's v5 Ant model
(:mod:`~metabench.tasks.ant.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"``, ...);
:mod:`metabench.tasks.ant.envs` says where they differ. Nothing loads with the package: MuJoCo
loads with the envs' module.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # oyster's meta-test: 600 steps of 200, 3 episodes
        name: TaskEnvDeclaration(f"metabench.tasks.ant.envs:{name}Env", 3)
        for name in ("AntDir", "AntGoal")
    }
)
