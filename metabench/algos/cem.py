"""CEM: the cross-entropy method, run from scratch on every test task (no meta-learning).

The semantics are garage's ``CEM``: a diagonal Gaussian over the parameters of a deterministic
linear policy; each generation samples ``n_samples`` candidates, plays one episode with each and
refits the Gaussian (maximum likelihood) to the best ``best_frac`` of them. An extra, decaying
variance keeps the search from collapsing early. See :mod:`metabench.algos.policy_search` for how
the exploration episodes of a task drive the search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from metabench.algos.implementation import Implementation
from metabench.algos.policy_search import (
    PolicySearch,
    Search,
    check_count,
    check_generation,
    check_positive,
    population_defaults,
)
from metabench.validation import MAX_COUNT, check_config, check_number, option

__all__ = ["CEM", "CEMConfig", "CEMSearch"]


@dataclass(frozen=True)
class CEMConfig:
    """CEM's hyperparameters (garage's CEM, elite fraction 0.2): defaults, ranges, docs."""

    n_samples: int = option(
        10, "candidates per generation (each plays one episode)", low=2, high=MAX_COUNT
    )
    best_frac: float = option(
        0.2, "fraction of each generation the Gaussian is refit to", low=0.0, high=1.0,
        low_open=True,
    )  # fmt: skip
    init_std: float = option(1.0, "initial std of every parameter", low=0.0, low_open=True)
    extra_std: float = option(1.0, "std added to the sampling, decaying to 0", low=0.0)
    extra_decay_time: float = option(
        10.0, "generations the extra std takes to decay", low=0.0, low_open=True
    )

    def __post_init__(self) -> None:
        check_config(self)


class CEMSearch(Search):
    """One CEM run.

    Generation ``g`` (from 0) samples ``mean + sample_std * N(0, I)`` with
    ``sample_std = sqrt(std**2 + extra_std**2 * max(1 - g / extra_decay_time, 0))``; :meth:`tell`
    keeps the ``n_best = max(1, floor(n_samples * best_frac))`` candidates of highest return
    (ties: the earlier candidate) and sets ``mean`` and ``std`` to their per-parameter mean and
    (population) standard deviation.
    """

    def __init__(
        self,
        n_params: int,
        n_samples: int,
        best_frac: float,
        init_std: float,
        extra_std: float,
        extra_decay_time: float,
        rng: np.random.Generator,
    ) -> None:
        self.n_samples = n_samples
        self.n_best = max(1, int(n_samples * best_frac + 1e-9))
        self.extra_std = extra_std
        self.extra_decay_time = extra_decay_time
        self.mean = np.zeros(n_params)
        self.std = np.full(n_params, float(init_std))
        self.generation = 0
        self.rng = rng

    @property
    def sample_std(self) -> np.ndarray:
        """The standard deviation the next :meth:`ask` samples with."""
        extra_var = self.extra_std**2 * max(1.0 - self.generation / self.extra_decay_time, 0.0)
        return np.sqrt(self.std**2 + extra_var)

    def ask(self) -> np.ndarray:
        noise = self.rng.standard_normal((self.n_samples, self.mean.size))
        return self.mean + self.sample_std * noise

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:
        best = np.argsort(-np.asarray(returns), kind="stable")[: self.n_best]
        elite = np.asarray(candidates)[best]
        self.mean = elite.mean(axis=0)
        self.std = elite.std(axis=0)
        self.generation += 1

    def result(self) -> np.ndarray:
        """The mean of the search distribution (garage's CEM policy after training)."""
        return self.mean.copy()


class CEM(PolicySearch):
    """Cross-entropy method on each test task: the "no meta-learning" reference.

    :param action_space: the task env's Box action space.
    :param observation_space: the task env's flat Box observation space.
    :param n_samples: candidates per generation (each plays one exploration episode).
    :param best_frac: fraction of each generation the Gaussian is refit to, in ``(0, 1]``.
    :param init_std: initial standard deviation of every parameter (the mean starts at 0).
    :param extra_std: standard deviation added to the sampling, decaying linearly to 0.
    :param extra_decay_time: generations it takes the extra standard deviation to decay.
    :param seed: seeds the searches; each :meth:`get_exploration_policy` call draws its own
        stream from it. ``None`` draws fresh entropy.

    The policy is ``a = clip(W @ obs + b)`` (:class:`~metabench.algos.policy_search.LinearPolicy`);
    the adapted policy uses the final mean. Use it with ``exploration_episodes`` a multiple of
    ``n_samples``.

    Example::

        >>> from metabench.evaluation import MetaEvaluator
        >>> from metabench.tasks.toy.envs import PointGoalEnv
        >>> env = PointGoalEnv()
        >>> algo = CEM(env.action_space, env.observation_space, n_samples=10, seed=0)
        >>> result = MetaEvaluator(PointGoalEnv, [{"goal": [0.3, -0.2]}], 50, 1).evaluate(algo)
        >>> result.test_return > max(result.return_per_episode[:10])
        True
    """

    def __init__(
        self,
        action_space: Any,
        observation_space: Any,
        n_samples: int = 10,
        best_frac: float = 0.2,
        init_std: float = 1.0,
        extra_std: float = 1.0,
        extra_decay_time: float = 10.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(action_space, observation_space, seed)
        self.n_samples = check_count(
            "n_samples", n_samples, 2, "CEM needs at least two candidates per generation to select"
        )
        try:
            fraction = check_number("best_frac", best_frac)
        except ValueError:
            fraction = math.nan
        if not 0 < fraction <= 1:
            raise ValueError(
                f"best_frac must be in (0, 1], the fraction of each generation the "
                f"Gaussian is refit to (garage: 0.05, here 0.2), got {best_frac!r}"
            )
        self.best_frac = fraction
        self.init_std = check_positive("init_std", init_std)
        self.extra_std = check_positive("extra_std", extra_std, allow_zero=True)
        self.extra_decay_time = check_positive("extra_decay_time", extra_decay_time)

    def make_search(self, rng: np.random.Generator) -> CEMSearch:
        return CEMSearch(
            self.n_params,
            self.n_samples,
            self.best_frac,
            self.init_std,
            self.extra_std,
            self.extra_decay_time,
            rng,
        )


# -- the entry point of baselines/cem.toml ---------------------------------------------------------
CEM_IMPLEMENTATION = Implementation(CEM, CEMConfig, population_defaults, check_generation("CEM"))
"""CEM on a benchmark: ``entry_point = "metabench.algos.cem:CEM_IMPLEMENTATION"``."""
