"""Behaviour of metabench.data against hand-computed values and loop-built references."""

from __future__ import annotations

import dataclasses
import doctest
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metabench.data
from metabench.data import EpisodeBatch, StepType

F, M, TE, TO = StepType.FIRST, StepType.MID, StepType.TERMINAL, StepType.TIMEOUT


def make_fields() -> dict[str, Any]:
    """Three episodes of lengths 3, 1, 2 with 2-D observations and 1-D actions.

    Observation rows count up from 0, 10 and 20 per episode so every row is recognisable.
    """
    return {
        "observations": np.array([[0, 1], [2, 3], [4, 5], [10, 11], [20, 21], [22, 23]], float),
        "last_observations": np.array([[6, 7], [12, 13], [24, 25]], float),
        "actions": np.array([[0.1], [0.2], [0.3], [0.4], [0.5], [0.6]]),
        "rewards": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        "step_types": np.array([F, M, TO, TE, F, TE]),
        "lengths": np.array([3, 1, 2]),
        "env_infos": {"x_velocity": np.arange(6) * 10.0},
        "agent_infos": {
            "log_prob": -np.arange(6, dtype=float),
            "mean": np.arange(12, dtype=np.float32).reshape(6, 2),
        },
        "episode_infos": {"goal_velocity": np.array([0.5, 1.5, 2.5])},
    }


def make_batch() -> EpisodeBatch:
    return EpisodeBatch(**make_fields())


def assert_batches_equal(a: EpisodeBatch, b: EpisodeBatch) -> None:
    """Exact equality of every field, dtypes included."""
    for field in dataclasses.fields(EpisodeBatch):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, dict):
            assert x.keys() == y.keys(), field.name
            for key in x:
                assert x[key].dtype == y[key].dtype, (field.name, key)
                np.testing.assert_array_equal(x[key], y[key], err_msg=f"{field.name}[{key}]")
        else:
            assert x.dtype == y.dtype, field.name
            np.testing.assert_array_equal(x, y, err_msg=field.name)


def loop_padded(flat: np.ndarray, lengths: np.ndarray, max_length: int) -> np.ndarray:
    """Reference padding, one step at a time."""
    out = np.zeros((len(lengths), max_length, *flat.shape[1:]), dtype=flat.dtype)
    offset = 0
    for i, length in enumerate(lengths):
        for t in range(length):
            out[i, t] = flat[offset + t]
        offset += length
    return out


# -- StepType --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("step_cnt", "max_length", "done", "expected"),
    [
        (1, 5, False, F),
        (2, 5, False, M),
        (4, 5, False, M),
        (5, 5, False, TO),
        (7, 5, False, TO),
        (3, 5, True, TE),
        (1, 5, True, TE),
        (5, 5, True, TE),  # a real end on the last allowed step is still an end
        (1, 1, False, TO),
        (1, None, False, F),
        (1000, None, False, M),
        (1000, None, True, TE),
    ],
)
def test_get_step_type(
    step_cnt: int, max_length: int | None, done: bool, expected: StepType
) -> None:
    assert StepType.get_step_type(step_cnt, max_length, done) is expected


def test_get_step_type_rejects_step_before_reset() -> None:
    with pytest.raises(ValueError, match="step_cnt must be >= 1, got 0"):
        StepType.get_step_type(0, 5, False)
    with pytest.raises(ValueError, match="max_episode_length must be >= 1"):
        StepType.get_step_type(1, 0, False)


def test_step_type_values() -> None:
    assert [int(s) for s in (F, M, TE, TO)] == [0, 1, 2, 3]


# -- construction ------------------------------------------------------------------------------
def test_sizes_and_stored_dtypes() -> None:
    batch = make_batch()
    assert batch.n_episodes == 3
    assert batch.n_steps == 6
    assert batch.lengths.dtype == np.int64
    assert batch.step_types.dtype == np.int8
    assert batch.step_types.tolist() == [0, 1, 3, 2, 0, 2]


def test_accepts_lists_and_object_step_types() -> None:
    fields = make_fields()
    fields["lengths"] = [3, 1, 2]
    fields["rewards"] = fields["rewards"].tolist()
    fields["step_types"] = np.array([F, M, TO, TE, F, TE], dtype=object)
    batch = EpisodeBatch(**fields)
    assert isinstance(batch.rewards, np.ndarray)
    assert batch.rewards.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert batch.step_types.tolist() == [0, 1, 3, 2, 0, 2]


def test_info_dicts_are_copied_and_batch_is_frozen() -> None:
    fields = make_fields()
    batch = EpisodeBatch(**fields)
    fields["env_infos"]["added_later"] = np.zeros(6)
    assert set(batch.env_infos) == {"x_velocity"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.rewards = np.zeros(6)  # type: ignore[misc]


def test_infos_default_to_empty() -> None:
    fields = make_fields()
    for name in ("env_infos", "agent_infos", "episode_infos"):
        del fields[name]
    batch = EpisodeBatch(**fields)
    assert batch.env_infos == batch.agent_infos == batch.episode_infos == {}
    assert len(batch.split()) == 3


def test_non_finite_rewards_are_allowed() -> None:
    fields = make_fields()
    fields["rewards"] = np.array([1.0, np.nan, 3.0, np.inf, 5.0, 6.0])
    returns = EpisodeBatch(**fields).episode_returns()
    assert np.isnan(returns[0])
    assert returns[1] == np.inf
    assert returns[2] == 11.0


# -- validation --------------------------------------------------------------------------------
def _replace(name: str, value: Any) -> dict[str, Any]:
    fields = make_fields()
    fields[name] = value
    return fields


def _replace_info(name: str, key: str, value: Any) -> dict[str, Any]:
    fields = make_fields()
    fields[name] = {**fields[name], key: value}
    return fields


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            _replace("observations", np.zeros((5, 2))),
            r"observations has shape \(5, 2\), expected leading dimension 6",
        ),
        (_replace("observations", np.float64(1.0)), r"observations has shape \(\), expected"),
        (
            _replace("actions", np.zeros((7, 1))),
            r"actions has shape \(7, 1\), expected leading dimension 6",
        ),
        (
            _replace("last_observations", np.zeros((2, 2))),
            r"last_observations has shape \(2, 2\), expected leading dimension 3",
        ),
        (
            _replace("last_observations", np.zeros((3, 3))),
            r"last_observations has shape \(3, 3\), expected \(3, 2\)",
        ),
        (_replace("rewards", np.zeros((6, 1))), r"rewards has shape \(6, 1\), expected \(6,\)"),
        (_replace("rewards", np.zeros(5)), r"rewards has shape \(5,\), expected \(6,\)"),
        (_replace("lengths", np.array([3, 0, 3])), r"lengths must be .*positive ints.*\[3, 0, 3\]"),
        (_replace("lengths", np.array([4, -1, 3])), r"lengths must be .*\[4, -1, 3\]"),
        (_replace("lengths", np.array([[3, 1, 2]])), r"lengths must be .*shape \(1, 3\)"),
        (_replace("lengths", np.array([3.0, 1.0, 2.0])), r"lengths must be .*dtype float64"),
        (_replace("lengths", np.array([], dtype=int)), r"lengths must be a non-empty"),
        (_replace("lengths", np.array([3, 1, 3])), r"observations has shape \(6, 2\).*7"),
        (
            _replace("step_types", np.array([0, 1, 3, 4, 0, 7])),
            r"step_types has invalid values \[4, 7\] at indices \[3, 5\]",
        ),
        (_replace("step_types", np.array([0, 1, 3, -1, 0, 2])), r"invalid values \[-1\]"),
        (_replace("step_types", np.zeros(6)), r"step_types has dtype float64, expected ints"),
        (_replace("step_types", np.zeros(5, dtype=int)), r"step_types has shape \(5,\)"),
        (
            _replace_info("env_infos", "x_velocity", np.zeros(5)),
            r"env_infos\['x_velocity'\] has shape \(5,\), expected leading dimension 6",
        ),
        (
            _replace_info("agent_infos", "mean", np.zeros((3, 2))),
            r"agent_infos\['mean'\] has shape \(3, 2\), expected leading dimension 6",
        ),
        (
            _replace_info("agent_infos", "scalar", 1.0),
            r"agent_infos\['scalar'\] has shape \(\), expected leading dimension 6",
        ),
        (
            _replace_info("episode_infos", "goal_velocity", np.zeros(6)),
            r"episode_infos\['goal_velocity'\] has shape \(6,\), expected leading dimension 3",
        ),
        (_replace("env_infos", [np.zeros(6)]), r"env_infos must be a mapping"),
    ],
)
def test_validation_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EpisodeBatch(**fields)


# -- split / concatenate -------------------------------------------------------------------------
def test_split_gives_each_episode() -> None:
    episodes = make_batch().split()
    assert [e.n_episodes for e in episodes] == [1, 1, 1]
    assert [e.lengths.tolist() for e in episodes] == [[3], [1], [2]]
    middle = episodes[1]
    assert middle.observations.tolist() == [[10.0, 11.0]]
    assert middle.last_observations.tolist() == [[12.0, 13.0]]
    assert middle.actions.tolist() == [[0.4]]
    assert middle.rewards.tolist() == [4.0]
    assert middle.step_types.tolist() == [TE]
    assert middle.env_infos["x_velocity"].tolist() == [30.0]
    assert middle.agent_infos["mean"].tolist() == [[6.0, 7.0]]
    assert middle.episode_infos["goal_velocity"].tolist() == [1.5]
    assert episodes[2].observations.tolist() == [[20.0, 21.0], [22.0, 23.0]]


def test_split_then_concatenate_round_trips_exactly() -> None:
    batch = make_batch()
    assert_batches_equal(EpisodeBatch.concatenate(*batch.split()), batch)


def test_concatenate_keeps_argument_order() -> None:
    a, b, c = make_batch().split()
    joined = EpisodeBatch.concatenate(c, a)
    assert joined.lengths.tolist() == [2, 3]
    assert joined.rewards.tolist() == [5.0, 6.0, 1.0, 2.0, 3.0]
    assert joined.last_observations.tolist() == [[24.0, 25.0], [6.0, 7.0]]
    assert joined.episode_infos["goal_velocity"].tolist() == [2.5, 0.5]
    assert_batches_equal(EpisodeBatch.concatenate(a, EpisodeBatch.concatenate(b, c)), make_batch())


def test_concatenate_of_nothing_raises() -> None:
    with pytest.raises(ValueError, match="at least one EpisodeBatch"):
        EpisodeBatch.concatenate()


def test_concatenate_rejects_mismatched_info_keys() -> None:
    a, b, _ = make_batch().split()
    fields = {f.name: getattr(b, f.name) for f in dataclasses.fields(EpisodeBatch)}
    fields["agent_infos"] = {"log_prob": b.agent_infos["log_prob"]}
    with pytest.raises(ValueError, match=r"agent_infos keys differ: .*\['log_prob', 'mean'\]"):
        EpisodeBatch.concatenate(a, EpisodeBatch(**fields))


def test_concatenate_rejects_mismatched_shapes() -> None:
    a, b, _ = make_batch().split()
    fields = {f.name: getattr(b, f.name) for f in dataclasses.fields(EpisodeBatch)}
    wide = {**fields, "observations": np.zeros((1, 3)), "last_observations": np.zeros((1, 3))}
    with pytest.raises(ValueError, match=r"observations per-step shape differs: .*\(2,\).*\(3,\)"):
        EpisodeBatch.concatenate(a, EpisodeBatch(**wide))
    odd_info = {**fields, "agent_infos": {**b.agent_infos, "mean": np.zeros((1, 5))}}
    with pytest.raises(ValueError, match=r"agent_infos\['mean'\] per-row shape differs"):
        EpisodeBatch.concatenate(a, EpisodeBatch(**odd_info))


# -- to_list / from_list -------------------------------------------------------------------------
def test_to_list_contents() -> None:
    episodes = make_batch().to_list()
    assert len(episodes) == 3
    first = episodes[0]
    assert set(first) == {
        "observations",
        "next_observations",
        "actions",
        "rewards",
        "step_types",
        "env_infos",
        "agent_infos",
        "episode_infos",
    }
    assert first["observations"].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert first["next_observations"].tolist() == [[2, 3], [4, 5], [6, 7]]
    assert first["rewards"].tolist() == [1.0, 2.0, 3.0]
    assert first["step_types"].tolist() == [F, M, TO]
    assert first["env_infos"]["x_velocity"].tolist() == [0.0, 10.0, 20.0]
    assert first["agent_infos"]["mean"].shape == (3, 2)
    assert episodes[2]["episode_infos"]["goal_velocity"] == 2.5


def test_to_list_from_list_round_trips() -> None:
    batch = make_batch()
    assert_batches_equal(EpisodeBatch.from_list(batch.to_list()), batch)


def test_from_list_with_one_more_observation_than_steps() -> None:
    paths = [
        {
            "observations": np.array([[0.0], [1.0], [2.0]]),
            "actions": np.zeros((2, 1)),
            "rewards": np.array([1.0, 1.0]),
            "step_types": [F, TO],
        },
        {
            "observations": np.array([[5.0], [6.0]]),
            "actions": np.zeros((1, 1)),
            "rewards": np.array([3.0]),
            "step_types": [TE],
        },
    ]
    batch = EpisodeBatch.from_list(paths)
    assert batch.lengths.tolist() == [2, 1]
    assert batch.observations[:, 0].tolist() == [0.0, 1.0, 5.0]
    assert batch.last_observations[:, 0].tolist() == [2.0, 6.0]
    assert batch.next_observations[:, 0].tolist() == [1.0, 2.0, 6.0]


def test_from_list_with_t_observations_uses_next_or_repeats_last() -> None:
    base = {
        "observations": np.array([[0.0], [1.0]]),
        "actions": np.zeros((2, 1)),
        "rewards": np.zeros(2),
        "step_types": [F, TE],
    }
    with_next = {**base, "next_observations": np.array([[1.0], [9.0]])}
    assert EpisodeBatch.from_list([with_next]).last_observations.tolist() == [[9.0]]
    assert EpisodeBatch.from_list([base]).last_observations.tolist() == [[1.0]]  # lenient


def _path(length: int = 2) -> dict[str, Any]:
    return {
        "observations": np.zeros((length, 2)),
        "actions": np.zeros((length, 1)),
        "rewards": np.zeros(length),
        "step_types": np.zeros(length, dtype=int),
        "env_infos": {"x_velocity": np.zeros(length)},
    }


def test_from_list_errors() -> None:
    with pytest.raises(ValueError, match="at least one path"):
        EpisodeBatch.from_list([])
    missing = _path()
    del missing["step_types"]
    with pytest.raises(ValueError, match=r"paths\[1\] is missing \['step_types'\]"):
        EpisodeBatch.from_list([_path(), missing])
    with pytest.raises(ValueError, match=r"paths\[0\]\['observations'\] has shape \(4, 2\)"):
        EpisodeBatch.from_list([{**_path(2), "observations": np.zeros((4, 2))}])
    with pytest.raises(ValueError, match=r"paths\[0\]\['rewards'\] has shape \(0,\)"):
        EpisodeBatch.from_list([_path(0)])
    with pytest.raises(ValueError, match=r"env_infos keys differ: paths\[0\]"):
        EpisodeBatch.from_list([_path(), {**_path(), "env_infos": {}}])
    # Off-by-one actions in two paths would cancel out in the total; each path is checked.
    long_actions = {**_path(2), "actions": np.zeros((3, 1))}
    short_actions = {**_path(2), "actions": np.zeros((1, 1))}
    with pytest.raises(ValueError, match=r"paths\[0\]\['actions'\] has shape \(3, 1\)"):
        EpisodeBatch.from_list([long_actions, short_actions])
    with pytest.raises(ValueError, match=r"paths\[0\]\['env_infos'\]\['x_velocity'\]"):
        EpisodeBatch.from_list([{**_path(2), "env_infos": {"x_velocity": np.zeros(3)}}])


# -- derived arrays ----------------------------------------------------------------------------
def test_next_observations_element_by_element() -> None:
    batch = make_batch()
    expected = [[2, 3], [4, 5], [6, 7], [12, 13], [22, 23], [24, 25]]
    assert batch.next_observations.shape == batch.observations.shape
    for row, want in zip(batch.next_observations, expected, strict=True):
        assert row.tolist() == want


def test_terminals() -> None:
    assert make_batch().terminals.tolist() == [False, False, False, True, False, True]


def test_observations_and_actions_lists() -> None:
    batch = make_batch()
    assert [o.tolist() for o in batch.observations_list] == [
        [[0, 1], [2, 3], [4, 5]],
        [[10, 11]],
        [[20, 21], [22, 23]],
    ]
    assert [a[:, 0].tolist() for a in batch.actions_list] == [[0.1, 0.2, 0.3], [0.4], [0.5, 0.6]]


@pytest.mark.parametrize("discount", [1.0, 0.9, 0.5, 0.0])
def test_episode_returns_match_manual_discounted_sum(discount: float) -> None:
    batch = make_batch()
    expected = []
    for rewards in ([1.0, 2.0, 3.0], [4.0], [5.0, 6.0]):
        total, weight = 0.0, 1.0
        for reward in rewards:
            total += weight * reward
            weight *= discount
        expected.append(total)
    returns = batch.episode_returns(discount)
    assert returns.shape == (3,)
    np.testing.assert_allclose(returns, expected, rtol=1e-12)


def test_episode_returns_rejects_bad_discount() -> None:
    for discount in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="discount must be in"):
            make_batch().episode_returns(discount)


# -- padded views ------------------------------------------------------------------------------
def test_padded_views_equal_loop_built_padding() -> None:
    batch = make_batch()
    lengths = np.array([3, 1, 2])
    pairs = {
        "observations": (batch.padded_observations, batch.observations),
        "next_observations": (batch.padded_next_observations, batch.next_observations),
        "actions": (batch.padded_actions, batch.actions),
        "rewards": (batch.padded_rewards, batch.rewards),
        "step_types": (batch.padded_step_types, batch.step_types),
        "x_velocity": (batch.padded_env_infos["x_velocity"], batch.env_infos["x_velocity"]),
        "log_prob": (batch.padded_agent_infos["log_prob"], batch.agent_infos["log_prob"]),
        "mean": (batch.padded_agent_infos["mean"], batch.agent_infos["mean"]),
    }
    for name, (padded, flat) in pairs.items():
        expected = loop_padded(flat, lengths, 3)
        assert padded.shape == expected.shape, name
        assert padded.dtype == flat.dtype, name
        np.testing.assert_array_equal(padded, expected, err_msg=name)
    assert batch.padded_rewards.tolist() == [[1, 2, 3], [4, 0, 0], [5, 6, 0]]


def test_padded_to_a_longer_max_length_and_not_shorter() -> None:
    batch = make_batch()
    wide = batch.padded(batch.rewards, max_length=5)
    np.testing.assert_array_equal(wide, loop_padded(batch.rewards, batch.lengths, 5))
    with pytest.raises(ValueError, match=r"max_length 2 is shorter than the longest episode \(3\)"):
        batch.padded(batch.rewards, max_length=2)
    with pytest.raises(ValueError, match=r"array has shape \(5,\), expected leading dimension 6"):
        batch.padded(np.zeros(5))


def test_valids() -> None:
    batch = make_batch()
    assert batch.valids.dtype == np.float64
    assert batch.valids.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert batch.valids.sum(axis=1).tolist() == batch.lengths.tolist()


def test_class_docstring_example_runs() -> None:
    result = doctest.testmod(metabench.data)
    assert result.attempted > 0
    assert result.failed == 0


# -- property test -----------------------------------------------------------------------------
@st.composite
def batches(draw: st.DrawFn) -> EpisodeBatch:
    lengths = draw(st.lists(st.integers(1, 7), min_size=1, max_size=5))
    obs_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    act_dim = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n, steps = len(lengths), sum(lengths)
    return EpisodeBatch(
        observations=rng.normal(size=(steps, *obs_shape)),
        last_observations=rng.normal(size=(n, *obs_shape)),
        actions=rng.normal(size=(steps, act_dim)).astype(np.float32),
        rewards=rng.normal(size=steps),
        step_types=rng.integers(0, 4, size=steps),
        lengths=np.array(lengths),
        env_infos={"info": rng.normal(size=steps)},
        agent_infos={"log_prob": rng.normal(size=(steps, 2))},
        episode_infos={"task": rng.normal(size=n)},
    )


@settings(max_examples=30, deadline=None)
@given(batch=batches(), cut=st.integers(0, 5))
def test_property_round_trips_and_padding(batch: EpisodeBatch, cut: int) -> None:
    episodes = batch.split()
    assert_batches_equal(EpisodeBatch.concatenate(*episodes), batch)
    cut = min(max(cut, 1), batch.n_episodes)
    if cut < batch.n_episodes:
        halves = (
            EpisodeBatch.concatenate(*episodes[:cut]),
            EpisodeBatch.concatenate(*episodes[cut:]),
        )
        assert_batches_equal(EpisodeBatch.concatenate(*halves), batch)
    assert_batches_equal(EpisodeBatch.from_list(batch.to_list()), batch)

    valids = batch.valids
    longest = int(batch.lengths.max())
    assert valids.shape == (batch.n_episodes, longest)
    np.testing.assert_array_equal(valids.sum(axis=1), batch.lengths)
    padded = batch.padded_observations
    assert padded.shape == (batch.n_episodes, longest, *batch.observations.shape[1:])
    # Real steps, read row by row, are the flat array; padding is all zeros.
    np.testing.assert_array_equal(padded[valids == 1], batch.observations)
    assert not padded[valids == 0].any()
    np.testing.assert_array_equal(padded, loop_padded(batch.observations, batch.lengths, longest))
