"""The toy tasks: a 2-D point reaching a goal and a Bernoulli bandit, for fast tests and
sanity checks (:mod:`~metabench.tasks.toy.envs`)."""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        "PointGoal": TaskEnvDeclaration("metabench.tasks.toy.envs:PointGoalEnv", 2),
        "Bandit": TaskEnvDeclaration("metabench.tasks.toy.envs:BanditEnv", 3),
    }
)
