"""Humanoid-Dir, the humanoid task of PEARL and VariBAD, on Gymnasium's v5 Humanoid model
(:mod:`~metabench.tasks.humanoid.envs`).

Each code's variant is a named protocol of the same env (``protocol="oyster"`` or
``"varibad"``); :mod:`metabench.tasks.humanoid.envs` says where they differ. Nothing loads with
the package: MuJoCo loads with the envs' module.
"""
