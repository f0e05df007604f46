"""Point-Robot and Sparse-Point-Robot, the 2-D navigation tasks of PEARL and VariBAD
(:mod:`~metabench.tasks.point_robot.envs`).

Each code's variant is a named protocol (``protocol="oyster"`` or ``"varibad"``) of the same two
envs; :mod:`metabench.tasks.point_robot.envs` says where they differ. No MuJoCo is needed.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # oyster's meta-test: 60 steps of 20 (3 episodes); the sparse one's 400 (20 episodes)
        "PointRobot": TaskEnvDeclaration("metabench.tasks.point_robot.envs:PointRobotEnv", 3),
        "SparsePointRobot": TaskEnvDeclaration(
            "metabench.tasks.point_robot.envs:SparsePointRobotEnv", 20
        ),
    }
)
