"""CEM and CMA-ES from scratch per test task, checked against hand rollouts and hand updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from metabench.algos.cem import CEM, CEMSearch
from metabench.algos.cmaes import CMAES
from metabench.algos.nop import NOP
from metabench.algos.policy_search import LinearPolicy, PolicySearch, SearchPolicy
from metabench.evaluation import MetaEvaluator, MetaTestResult
from metabench.tasks.toy.envs import PointGoalEnv

GOAL = [0.3, -0.2]
H = PointGoalEnv().horizon
ENV = PointGoalEnv()


def make_cem(**kwargs: Any) -> CEM:
    options: dict[str, Any] = {"n_samples": 10, "seed": 0, **kwargs}
    return CEM(ENV.action_space, ENV.observation_space, **options)


def make_cmaes(**kwargs: Any) -> CMAES:
    options: dict[str, Any] = {"seed": 0, **kwargs}
    return CMAES(ENV.action_space, ENV.observation_space, **options)


def evaluate(
    algo: PolicySearch, exploration_episodes: int, test_episodes: int = 2
) -> tuple[MetaTestResult, SearchPolicy]:
    """Meta-test ``algo`` on the one PointGoal task; also return its exploration policy."""
    policies: list[SearchPolicy] = []
    make_policy = algo.get_exploration_policy

    def recording() -> SearchPolicy:
        policies.append(make_policy())
        return policies[-1]

    algo.get_exploration_policy = recording  # type: ignore[method-assign]
    evaluator = MetaEvaluator(PointGoalEnv, [{"goal": GOAL}], exploration_episodes, test_episodes)
    result = evaluator.evaluate(algo)
    assert len(policies) == 1
    return result, policies[0]


def hand_rollout(params: np.ndarray) -> float:
    """Return of one PointGoal episode of ``a = clip(W @ pos + b, ±0.1)``, stepped by hand."""
    weights, bias = params[:4].reshape(2, 2), params[4:]
    position, goal, total = np.zeros(2), np.asarray(GOAL), 0.0
    for _ in range(H):
        position = position + np.clip(weights @ position + bias, -0.1, 0.1)
        total -= float(np.linalg.norm(position - goal))
    return total


# -- (1) learning ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("make", "exploration_episodes"), [(make_cem, 60), (make_cmaes, 63)])
def test_search_beats_its_first_generation_and_nop(make, exploration_episodes):
    algo = make()
    result, policy = evaluate(algo, exploration_episodes)
    returns = result.tasks[0].episode_returns
    first = returns[: algo.n_samples]
    nop = MetaEvaluator(PointGoalEnv, [{"goal": GOAL}], 1, 1).evaluate(NOP(ENV.action_space))
    assert nop.test_return == pytest.approx(-H * np.linalg.norm(GOAL))  # -7.21
    assert result.test_return > max(first) + 10  # first generation: mean ~-29, best ~-20
    assert result.test_return > np.mean(first) + 20
    assert result.test_return > nop.test_return + 3  # adapted ~-3.5 (CEM), ~-3.0 (CMA-ES)
    assert len(policy.told) == exploration_episodes // algo.n_samples


# -- (2) the CEM update by hand -------------------------------------------------------------------
def test_cem_samples_selects_refits_and_decays_extra_std_as_computed_by_hand():
    search = CEMSearch(3, 5, 0.4, 0.5, 2.0, 4, np.random.default_rng(7))
    noise = np.random.default_rng(7)
    assert search.n_best == 2
    candidates = search.ask()
    expected = np.sqrt(0.5**2 + 2.0**2) * noise.standard_normal((5, 3))
    np.testing.assert_allclose(candidates, expected, rtol=1e-12)

    search.tell(candidates, np.array([1.0, 5.0, -2.0, 5.0, 3.0]))  # elite: 1 and 3 (tie, 5.0)
    a, b = candidates[1], candidates[3]
    np.testing.assert_allclose(search.mean, (a + b) / 2, rtol=1e-12)
    np.testing.assert_allclose(search.std, np.abs(a - b) / 2, rtol=1e-12)
    std = np.abs(a - b) / 2
    np.testing.assert_allclose(search.sample_std, np.sqrt(std**2 + 4.0 * (1 - 1 / 4)))
    candidates = search.ask()
    expected = (a + b) / 2 + np.sqrt(std**2 + 3.0) * noise.standard_normal((5, 3))
    np.testing.assert_allclose(candidates, expected, rtol=1e-12)

    search.tell(candidates, np.array([0.0, 1.0, 2.0, 3.0, 4.0]))  # elite: 4 and 3
    np.testing.assert_allclose(search.mean, candidates[[3, 4]].mean(axis=0), rtol=1e-12)
    for _ in range(3):  # generation 4 = extra_decay_time: the extra std is gone for good
        search.tell(search.ask(), np.arange(5.0))
    assert search.generation == 5
    np.testing.assert_array_equal(search.sample_std, search.std)
    assert search.result().tolist() == search.mean.tolist()


@pytest.mark.parametrize(("n", "frac", "n_best"), [(10, 0.2, 2), (10, 0.3, 3), (10, 0.01, 1)])
def test_cem_elite_size(n, frac, n_best):
    assert CEMSearch(2, n, frac, 1.0, 1.0, 1.0, np.random.default_rng(0)).n_best == n_best


def test_cem_best_frac_one_refits_to_the_whole_generation():
    search = CEMSearch(2, 4, 1.0, 1.0, 0.0, 1.0, np.random.default_rng(0))
    candidates = search.ask()
    search.tell(candidates, np.zeros(4))
    np.testing.assert_allclose(search.mean, candidates.mean(axis=0))
    np.testing.assert_allclose(search.std, candidates.std(axis=0))


# -- (3) episode k is played by candidate k; the update sees episode k's return ------------
@pytest.mark.parametrize(("make", "exploration_episodes"), [(make_cem, 30), (make_cmaes, 18)])
def test_played_candidates_and_told_returns_match_hand_rollouts(make, exploration_episodes):
    algo = make()
    result, policy = evaluate(algo, exploration_episodes, test_episodes=1)
    returns = result.tasks[0].episode_returns
    n = algo.n_samples
    assert len(policy.played) == exploration_episodes
    for k, params in enumerate(policy.played):
        assert returns[k] == pytest.approx(hand_rollout(params), abs=1e-9)
    assert policy.returns == pytest.approx(returns[:exploration_episodes], abs=1e-9)
    for g, (candidates, told) in enumerate(policy.told):
        np.testing.assert_array_equal(candidates, np.stack(policy.played[g * n : (g + 1) * n]))
        np.testing.assert_allclose(told, returns[g * n : (g + 1) * n], atol=1e-9)

    search = policy.search
    if isinstance(algo, CEM):  # the adapted policy is the refit mean of the last elite
        candidates, told = policy.told[-1]
        elite = candidates[np.argsort(-told)[: search.n_best]]  # type: ignore[attr-defined]
        adapted = elite.mean(axis=0)
    else:  # the best candidate played; cma minimised the negative returns
        best = int(np.argmax(returns[:exploration_episodes]))
        adapted = policy.played[best]
        assert search.es.result.fbest == pytest.approx(-returns[best])  # type: ignore[attr-defined]
    np.testing.assert_allclose(search.result(), adapted, rtol=1e-12)
    assert result.test_return == pytest.approx(hand_rollout(adapted), abs=1e-9)


def test_unfinished_generation_is_played_but_not_learned_from():
    algo = make_cem()
    with pytest.warns(UserWarning, match="multiple of n_samples"):
        _, policy = evaluate(algo, 15, test_episodes=1)
    assert len(policy.played) == 15 and len(policy.told) == 1


# -- (4) bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"best_frac": 0.0}, r"best_frac must be in \(0, 1\]"),
        ({"best_frac": 1.5}, r"best_frac must be in \(0, 1\]"),
        ({"best_frac": float("nan")}, r"best_frac must be in \(0, 1\]"),
        ({"n_samples": 1}, "n_samples must be an integer >= 2, got 1: CEM needs at least two"),
        ({"n_samples": 4.0}, "n_samples must be an integer"),
        ({"init_std": 0.0}, "init_std"),
        ({"extra_std": -1.0}, "extra_std"),
        ({"extra_decay_time": 0}, "extra_decay_time"),
        ({"seed": -1}, "seed"),
    ],
)
def test_cem_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_cem(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"n_samples": 1}, "n_samples"), ({"sigma0": -1.0}, "sigma0")]
)
def test_cmaes_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_cmaes(**kwargs)


@pytest.mark.parametrize("cls", [CEM, CMAES])
def test_non_box_spaces_are_rejected_with_the_fix(cls):
    with pytest.raises(ValueError, match=r"Box action space.*NOP or RL2"):
        cls(spaces.Discrete(3), ENV.observation_space)
    with pytest.raises(ValueError, match="FlattenObservation"):
        cls(ENV.action_space, spaces.Box(-1, 1, shape=(2, 2)))
    with pytest.raises(ValueError, match="FlattenObservation"):
        cls(ENV.action_space, spaces.Discrete(2))
    with pytest.raises(ValueError, match="build it from this env's spaces"):
        cls(ENV.action_space, spaces.Box(-1, 1, shape=(3,))).wrap_env(PointGoalEnv())


def test_exploration_policy_misuse_is_reported():
    algo = make_cem()
    with pytest.raises(ValueError, match=r"algo.wrap_env\(env\)"):
        algo.get_exploration_policy().get_action(np.zeros(2))  # a raw task observation
    with pytest.raises(ValueError, match="policy of get_exploration_policy"):
        nop_policy = NOP(ENV.action_space).get_exploration_policy()
        algo.adapt_policy(nop_policy, None)  # type: ignore[arg-type]
    policy = algo.get_exploration_policy()
    with pytest.raises(ValueError, match="EpisodeBatch of the 0 episodes"):
        algo.adapt_policy(policy, None)  # type: ignore[arg-type]


def test_train_only_counts_and_linear_policy_clips():
    algo = make_cmaes()
    assert algo.steps_per_iteration == 0 and algo.state_dict() == {}
    algo.train(3)
    algo.train(2)
    assert algo.n_iterations == 5
    assert algo.n_samples == 4 + int(3 * np.log(6))  # cma's default population for 6 params
    policy = LinearPolicy(
        np.array([1.0, 0.0, 0.0, 1.0, 0.05, -0.5]), algo.observation_space, algo.action_space
    )
    assert policy.get_action(np.array([0.02, 0.3, 9.0, 9.0, 9.0, 9.0])).tolist() == [0.07, -0.1]


# -- (5) determinism ------------------------------------------------------------------------------
@pytest.mark.parametrize(("make", "exploration_episodes"), [(make_cem, 20), (make_cmaes, 18)])
def test_same_seed_same_result_without_global_random_state(make, exploration_episodes):
    np.random.seed(1)
    state = np.random.get_state()
    first, policy = evaluate(make(), exploration_episodes)
    after = np.random.get_state()
    assert all(np.array_equal(x, y) for x, y in zip(state, after, strict=True))  # untouched
    np.random.seed(2)  # the global state does not matter
    second, again = evaluate(make(), exploration_episodes)
    assert first.tasks[0].episode_returns == second.tasks[0].episode_returns
    np.testing.assert_array_equal(policy.search.result(), again.search.result())
    other, _ = evaluate(make(seed=1), exploration_episodes)
    assert other.tasks[0].episode_returns != first.tasks[0].episode_returns


def test_adapt_policy_rejects_episodes_the_policy_did_not_play():
    from metabench.data import EpisodeBatch, StepType
    from metabench.wrappers import Trial

    algo = make_cem(n_samples=2)
    env = algo.wrap_env(Trial(PointGoalEnv(), episodes_per_trial=3))
    obs, _ = env.reset(seed=0, options={"task": {"goal": GOAL}})
    policy = algo.get_exploration_policy()
    paths = []
    for _ in range(2):
        policy.reset()
        rewards = []
        for _ in range(H):
            obs, reward, *_ = env.step(policy.get_action(obs))
            rewards.append(float(reward))
        types = [StepType.FIRST] + [StepType.MID] * (H - 2) + [StepType.TIMEOUT]
        paths.append(
            {
                "observations": np.zeros((H + 1, 8)),
                "actions": np.zeros((H, 2)),
                "rewards": np.asarray(rewards),
                "step_types": np.asarray(types),
            }
        )
    assert policy.returns == pytest.approx([sum(paths[0]["rewards"])])  # the 2nd is not over
    paths[0]["rewards"] = paths[0]["rewards"] + 1.0
    with pytest.raises(ValueError, match="do not have the returns this exploration policy"):
        algo.adapt_policy(policy, EpisodeBatch.from_list(paths))
