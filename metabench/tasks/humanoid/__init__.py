"""Humanoid-Dir, the humanoid task of PEARL and VariBAD, on Gymnasium's v5 Humanoid model
(:mod:`~metabench.tasks.humanoid.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"`` or
``"varibad"``); :mod:`metabench.tasks.humanoid.envs` says where they differ. Nothing loads with
the package: MuJoCo loads with the envs' module.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    # oyster's meta-test: 600 steps of 200, 3 episodes
    envs={"HumanoidDir": TaskEnvDeclaration("metabench.tasks.humanoid.envs:HumanoidDirEnv", 3)}
)
