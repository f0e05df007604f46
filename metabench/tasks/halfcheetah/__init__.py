"""HalfCheetahVel and HalfCheetahDir, garage's HalfCheetah tasks on Gymnasium's v5 model.

- :mod:`~metabench.tasks.halfcheetah.envs`: the task envs;
- :mod:`~metabench.tasks.halfcheetah.vector`: every cheetah of a meta-batch stepped as one
  vector env (``gymnasium.make_vec``'s default for these ids).

The declaration below is all that loads with the package: MuJoCo loads with the first env.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # garage's RL2-PPO HalfCheetahVel example: 4 episodes per trial.
        name: TaskEnvDeclaration(
            f"metabench.tasks.halfcheetah.envs:{name}Env",
            episodes_per_trial=4,
            vector_entry_point=f"metabench.tasks.halfcheetah.vector:{name}VectorEnv",
        )
        for name in ("HalfCheetahVel", "HalfCheetahDir")
    }
)
