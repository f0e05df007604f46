"""When a run meta-tests during training (``metabench train --eval-every`` or
``--eval-every-steps``).

One rule for the trainer's :class:`~metabench.harness.hooks.PeriodicMetaTest` and for the
planner, which counts the meta-tests a run will make before the run is built. An interval in
environment steps is what a grid needs: RL2 and MAML take different steps per iteration, and
learning curves are drawn against env steps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetaTestSchedule:
    """Every ``iterations`` iterations, or after the first iteration at or past each multiple of
    ``env_steps`` environment steps (when that is a whole number of iterations, exactly every
    that many); at most one of the two. Neither: no meta-test during training."""

    iterations: int = 0
    env_steps: int = 0

    def __post_init__(self) -> None:
        if self.iterations < 0 or self.env_steps < 0:
            raise ValueError(
                f"--eval-every and --eval-every-steps must be >= 0, got {self.iterations}, "
                f"{self.env_steps}"
            )
        if self.iterations and self.env_steps:
            raise ValueError("give --eval-every (iterations) or --eval-every-steps, not both")

    def __bool__(self) -> bool:
        return bool(self.iterations or self.env_steps)

    def due(self, iteration: int, steps_per_iteration: int) -> bool:
        """Whether a meta-test follows ``iteration`` (the first is 1) of ``steps_per_iteration``
        environment steps each."""
        if self.iterations:
            return iteration % self.iterations == 0
        if self.env_steps:
            before, after = (iteration - 1) * steps_per_iteration, iteration * steps_per_iteration
            return after // self.env_steps > before // self.env_steps
        return False

    def count(self, n_iterations: int, steps_per_iteration: int) -> int:
        """How many meta-tests a run of ``n_iterations`` makes during training."""
        return sum(self.due(i, steps_per_iteration) for i in range(1, n_iterations + 1))

    def options(self) -> list[str]:
        """The ``metabench train`` options that ask for this schedule."""
        if self.iterations:
            return ["--eval-every", str(self.iterations)]
        if self.env_steps:
            return ["--eval-every-steps", str(self.env_steps)]
        return []
