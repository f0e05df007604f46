"""Ant-Dir and Ant-Goal, the ant tasks of PEARL and VariBAD, on Gymnasium's v5 Ant model
(:mod:`~metabench.tasks.ant.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"``, ...);
:mod:`metabench.tasks.ant.envs` says where they differ. Nothing loads with the package: MuJoCo
loads with the envs' module.
"""
