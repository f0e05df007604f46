"""CMA-ES from scratch on every test task (no meta-learning), through the ``cma`` library.

garage's ``CMAES`` semantics: a population of ``n_samples`` linear-policy parameter vectors per
generation, one episode each, and ``cma.CMAEvolutionStrategy`` adapting mean, step size and
covariance from their returns (it minimises, so it is told the negative returns). See
:mod:`metabench.algos.policy_search` for how the exploration episodes of a task drive the search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cma
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
from metabench.validation import check_config, option

__all__ = ["CMAES", "CMAESConfig", "CMASearch"]


@dataclass(frozen=True)
class CMAESConfig:
    """CMA-ES's hyperparameters: defaults, ranges, docs."""

    n_samples: int | None = option(
        None, "candidates per generation (each plays one episode); null: cma's default", low=2
    )
    sigma0: float = option(1.0, "initial step size", low=0.0, low_open=True)

    def __post_init__(self) -> None:
        check_config(self)


class CMASearch(Search):
    """One ``cma.CMAEvolutionStrategy`` run from ``θ = 0`` with step size ``sigma0``.

    Its normal samples come from ``rng`` (cma's ``randn`` option) and its ``seed`` option is off,
    so it never reads or reseeds NumPy's global random state. Output and log files are off.
    """

    def __init__(
        self, n_params: int, n_samples: int | None, sigma0: float, rng: np.random.Generator
    ) -> None:
        options: dict[str, Any] = {
            "seed": np.nan,  # cma: "do nothing" to the global state
            "randn": lambda *shape: rng.standard_normal(shape),
            "verbose": -9,
            "verb_disp": 0,
            "verb_log": 0,
        }
        if n_samples is not None:
            options["popsize"] = n_samples
        self.es = cma.CMAEvolutionStrategy(np.zeros(n_params), sigma0, options)
        self.n_samples = int(self.es.popsize)

    def ask(self) -> np.ndarray:
        return np.asarray(self.es.ask(), dtype=np.float64)

    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:
        self.es.tell(list(candidates), list(-np.asarray(returns, dtype=np.float64)))

    def result(self) -> np.ndarray:
        """The best candidate played (garage's CMAES policy), or the mean before any generation."""
        best = self.es.result.xbest
        return np.array(self.es.mean if best is None else best, dtype=np.float64)


class CMAES(PolicySearch):
    """CMA-ES on each test task: the "no meta-learning" reference with an adaptive covariance.

    :param action_space: the task env's Box action space.
    :param observation_space: the task env's flat Box observation space.
    :param n_samples: candidates per generation (each plays one exploration episode); ``None``:
        cma's default ``4 + floor(3 ln n_params)``.
    :param sigma0: initial step size (standard deviation of every parameter; the mean starts at 0).
    :param seed: seeds the searches; each :meth:`get_exploration_policy` call draws its own
        stream from it. ``None`` draws fresh entropy.

    The policy is ``a = clip(W @ obs + b)`` (:class:`~metabench.algos.policy_search.LinearPolicy`);
    the adapted policy uses the best candidate found. Use it with ``exploration_episodes`` a
    multiple of :attr:`n_samples`.
    """

    def __init__(
        self,
        action_space: Any,
        observation_space: Any,
        n_samples: int | None = None,
        sigma0: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(action_space, observation_space, seed)
        if n_samples is not None:
            check_count(
                "n_samples", n_samples, 2, "CMA-ES needs at least two candidates per generation"
            )
        self.sigma0 = check_positive("sigma0", sigma0)
        self.n_samples = (
            int(n_samples)
            if n_samples is not None
            else CMASearch(self.n_params, None, self.sigma0, np.random.default_rng(0)).n_samples
        )

    def make_search(self, rng: np.random.Generator) -> CMASearch:
        return CMASearch(self.n_params, self.n_samples, self.sigma0, rng)


# -- the entry point of baselines/cmaes.toml -------------------------------------------------------
CMAES_IMPLEMENTATION = Implementation(
    CMAES, CMAESConfig, population_defaults, check_generation("CMA-ES")
)
"""CMA-ES on a benchmark: ``entry_point = "metabench.algos.cmaes:CMAES_IMPLEMENTATION"``."""
