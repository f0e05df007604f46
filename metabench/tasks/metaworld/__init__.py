"""Meta-World's ML1, ML10 and ML45 as metabench task envs.

- :mod:`~metabench.tasks.metaworld.envs`: the task envs and the task sampler of a split;
- :mod:`~metabench.tasks.metaworld.lean`: faster stepping of the Sawyer envs, to the same bits;
- :mod:`~metabench.tasks.metaworld.split`: the ``"metaworld"`` kind of ``[split]``;
- :mod:`~metabench.tasks.metaworld.count`: Meta-World's own success count of a meta-test.

The declaration below is all that loads with the package: Meta-World loads with the first env.
"""

from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(
    envs={
        # Meta-World's protocol: 10 adaptation episodes; its RNN wrapper scales rewards by 1/10.
        # Its envs are slow to step, so a run with several cores steps them in worker processes.
        name: TaskEnvDeclaration(
            f"metabench.tasks.metaworld.envs:{name}Env",
            episodes_per_trial=10,
            reward_scale=0.1,
            score="success",
            steps_in_workers=True,
        )
        for name in ("ML1", "ML10", "ML45")
    },
    splits={"metaworld": "metabench.tasks.metaworld.split:MetaWorldSplit"},
)
