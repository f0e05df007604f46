"""WholeSequenceLstmPolicy gives the stock RecurrentActorCriticPolicy's results, only faster;
WholeSequenceGruPolicy gives the results of a GRU written out and run one step at a time.

Batches are built with sb3-contrib's own ``create_sequencers`` (the function the rollout
buffer uses), so the tests see exactly the padded layout ``RecurrentPPO`` trains on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.buffers import create_sequencers
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from torch import nn

from metabench.algos.rl2 import WholeSequenceGruPolicy, WholeSequenceLstmPolicy

OBS_SPACE = spaces.Box(-1.0, 1.0, shape=(5,), dtype=np.float32)
BOX_ACTIONS = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
DISCRETE_ACTIONS = spaces.Discrete(3)
HIDDEN = 8
RTOL, ATOL = 1e-5, 1e-6  # float32 rounding

VARIANTS = [
    pytest.param({}, id="separate-critic-lstm"),
    pytest.param({"shared_lstm": True, "enable_critic_lstm": False}, id="shared-lstm"),
    pytest.param({"enable_critic_lstm": False}, id="no-critic-lstm"),
    pytest.param({"n_lstm_layers": 2}, id="two-layers"),
]
ACTION_SPACES = [
    pytest.param(BOX_ACTIONS, id="box"),
    pytest.param(DISCRETE_ACTIONS, id="discrete"),
]


def assert_close(actual: th.Tensor, expected: th.Tensor, what: str) -> None:
    """``torch.testing.assert_close`` at float32-rounding tolerance, naming the tensor."""
    th.testing.assert_close(actual, expected, rtol=RTOL, atol=ATOL, msg=lambda m: f"{what}: {m}")


def make_pair(
    action_space: spaces.Space, **kwargs: Any
) -> tuple[RecurrentActorCriticPolicy, WholeSequenceLstmPolicy]:
    """A stock policy and a WholeSequenceLstmPolicy with identical weights."""
    common: dict[str, Any] = {
        "lstm_hidden_size": HIDDEN,
        "net_arch": {"pi": [8], "vf": [8]},
        **kwargs,
    }
    th.manual_seed(0)
    stock = RecurrentActorCriticPolicy(OBS_SPACE, action_space, lambda _: 1e-3, **common)
    fast = WholeSequenceLstmPolicy(OBS_SPACE, action_space, lambda _: 1e-3, **common)
    fast.load_state_dict(stock.state_dict())
    return stock, fast


def buffer_batch(
    policy: RecurrentActorCriticPolicy, rng: np.random.Generator, length: int = 60
) -> tuple[th.Tensor, th.Tensor, RNNStates, th.Tensor]:
    """A padded minibatch laid out as ``RecurrentRolloutBuffer._get_samples`` lays it out.

    A flat stream of ``length`` steps with random episode starts and env changes is cut into
    sequences by ``create_sequencers`` and padded at the end; the initial states are random
    (as if stored mid-episode), so a missing reset at an episode start would show.
    """
    starts = (rng.random(length) < 0.12).astype(np.float32)
    starts[0] = 0.0  # first sequence starts mid-episode: its stored state must be kept
    env_change = (rng.random(length) < 0.05).astype(np.float32)
    seq_start_indices, pad, pad_and_flatten = create_sequencers(
        starts, env_change, th.device("cpu")
    )
    n_seq = len(seq_start_indices)
    obs_flat = rng.uniform(-1, 1, size=(length, *OBS_SPACE.shape)).astype(np.float32)
    act_flat = np.stack([policy.action_space.sample() for _ in range(length)]).astype(np.float32)
    obs_padded = pad(obs_flat)
    max_length = obs_padded.shape[1]
    obs = obs_padded.reshape((n_seq * max_length, *OBS_SPACE.shape))
    actions = pad(act_flat).reshape((n_seq * max_length, *act_flat.shape[1:]))
    episode_starts = pad_and_flatten(starts)
    state_shape = (policy.lstm_actor.num_layers, n_seq, HIDDEN)

    def state() -> tuple[th.Tensor, th.Tensor]:
        return th.randn(state_shape), th.randn(state_shape)

    return obs, actions, RNNStates(state(), state()), episode_starts


def evaluate_with_grads(
    policy: RecurrentActorCriticPolicy,
    obs: th.Tensor,
    actions: th.Tensor,
    states: RNNStates,
    episode_starts: th.Tensor,
) -> tuple[tuple[th.Tensor, ...], dict[str, th.Tensor]]:
    """``evaluate_actions`` outputs and the gradient of a generic scalar of them per parameter."""
    policy.zero_grad()
    values, log_prob, entropy = policy.evaluate_actions(obs, actions, states, episode_starts)
    assert entropy is not None
    # Fixed, distinct weights per output element so that every output contributes.
    gen = th.Generator().manual_seed(1)
    loss = sum(
        (t.flatten() * th.randn(t.numel(), generator=gen)).sum()
        for t in (values, log_prob, entropy)
    )
    assert isinstance(loss, th.Tensor)
    loss.backward()
    grads = {
        name: p.grad.clone() if p.grad is not None else th.zeros_like(p)
        for name, p in policy.named_parameters()
    }
    return (values.detach(), log_prob.detach(), entropy.detach()), grads


def assert_same_evaluation(
    stock: RecurrentActorCriticPolicy,
    fast: WholeSequenceLstmPolicy,
    batch: tuple[th.Tensor, th.Tensor, RNNStates, th.Tensor],
) -> None:
    outs_stock, grads_stock = evaluate_with_grads(stock, *batch)
    outs_fast, grads_fast = evaluate_with_grads(fast, *batch)
    for name, a, b in zip(("values", "log_prob", "entropy"), outs_stock, outs_fast, strict=True):
        assert_close(b, a, name)
    assert grads_stock.keys() == grads_fast.keys()
    assert any(g.abs().sum() > 0 for g in grads_stock.values())
    for name, g in grads_stock.items():
        assert_close(grads_fast[name], g, f"grad {name}")


def count_lstm_calls(policy: nn.Module) -> list[int]:
    """Record the sequence length of every call to the actor LSTM."""
    lengths: list[int] = []

    def hook(_module: nn.Module, args: tuple[th.Tensor, ...]) -> None:
        lengths.append(args[0].shape[0])

    lstm = policy.lstm_actor
    assert isinstance(lstm, nn.LSTM)
    lstm.register_forward_pre_hook(hook)
    return lengths


def test_buffer_puts_episode_starts_only_at_position_zero() -> None:
    """The premise of the fast path, checked on the buffer's own sequencer."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        starts = (rng.random(200) < 0.2).astype(np.float32)
        env_change = (rng.random(200) < 0.05).astype(np.float32)
        _, pad, _ = create_sequencers(starts, env_change, th.device("cpu"))
        padded = pad(starts)  # (n_seq, max_length)
        assert padded.sum() == starts.sum()
        assert th.all(padded[:, 1:] == 0.0)


@pytest.mark.parametrize("action_space", ACTION_SPACES)
@pytest.mark.parametrize("kwargs", VARIANTS)
def test_evaluate_actions_matches_stock(action_space: spaces.Space, kwargs: dict[str, Any]) -> None:
    stock, fast = make_pair(action_space, **kwargs)
    rng = np.random.default_rng(123)
    th.manual_seed(123)
    for _ in range(3):
        batch = buffer_batch(stock, rng)
        # The batch must exercise the stock per-step loop (a start inside the batch) and the
        # reset of some, not all, initial states.
        first_steps = batch[3].reshape(batch[2].pi[0].shape[1], -1)[:, 0]
        assert 0 < first_steps.sum() < len(first_steps)
        calls = count_lstm_calls(fast)
        assert_same_evaluation(stock, fast, batch)
        max_length = batch[0].shape[0] // batch[2].pi[0].shape[1]
        assert calls == [max_length]  # one LSTM call over the whole padded sequence


@pytest.mark.parametrize("kwargs", VARIANTS)
def test_start_in_the_middle_falls_back_to_stock(kwargs: dict[str, Any]) -> None:
    stock, fast = make_pair(DISCRETE_ACTIONS, **kwargs)
    rng = np.random.default_rng(7)
    th.manual_seed(7)
    obs, actions, states, episode_starts = buffer_batch(stock, rng)
    n_seq = states.pi[0].shape[1]
    starts = episode_starts.reshape(n_seq, -1).clone()
    max_length = starts.shape[1]
    starts[0, max_length // 2] = 1.0  # not something the buffer produces
    calls = count_lstm_calls(fast)
    assert_same_evaluation(stock, fast, (obs, actions, states, starts.flatten()))
    assert calls == [1] * max_length  # the parent's step-by-step loop


@pytest.mark.parametrize("kwargs", VARIANTS)
def test_single_step_predict_matches_stock(kwargs: dict[str, Any]) -> None:
    stock, fast = make_pair(BOX_ACTIONS, **kwargs)
    rng = np.random.default_rng(3)
    n_envs = 4
    state_shape = (stock.lstm_actor.num_layers, n_envs, HIDDEN)
    initial = (rng.normal(size=state_shape), rng.normal(size=state_shape))
    state_stock: tuple[np.ndarray, ...] | None = initial
    state_fast: tuple[np.ndarray, ...] | None = initial
    for step in range(5):
        obs = rng.uniform(-1, 1, size=(n_envs, *OBS_SPACE.shape)).astype(np.float32)
        episode_start = np.array([step == 0, False, step == 2, True])
        act_stock, state_stock = stock.predict(obs, state_stock, episode_start, deterministic=True)
        act_fast, state_fast = fast.predict(obs, state_fast, episode_start, deterministic=True)
        assert state_stock is not None and state_fast is not None
        np.testing.assert_allclose(act_fast, act_stock, rtol=RTOL, atol=ATOL)
        for a, b in zip(state_stock, state_fast, strict=True):
            np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL)


def train(policy_class: type[RecurrentActorCriticPolicy]) -> tuple[RecurrentPPO, list[int]]:
    model = RecurrentPPO(
        policy_class,
        "CartPole-v1",
        n_steps=64,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"lstm_hidden_size": 16, "net_arch": {"pi": [16], "vf": [16]}},
    )
    calls = count_lstm_calls(model.policy)
    model.learn(256)
    return model, calls


def test_recurrent_ppo_trains_like_stock() -> None:
    th.manual_seed(0)
    initial = RecurrentPPO(
        RecurrentActorCriticPolicy,
        "CartPole-v1",
        seed=0,
        device="cpu",
        policy_kwargs={"lstm_hidden_size": 16, "net_arch": {"pi": [16], "vf": [16]}},
    ).policy.state_dict()
    stock, stock_calls = train(RecurrentActorCriticPolicy)
    fast, fast_calls = train(WholeSequenceLstmPolicy)

    # CartPole episodes are short, so the stock update ran its per-step loop (many length-1
    # calls beyond the 256 rollout ones) and the fast one one call per minibatch.
    n_minibatches = 256 // 32
    assert len(stock_calls) > 256 + n_minibatches
    # rollout steps go through torch.lstm_cell, so nn.LSTM runs once per minibatch only
    assert len(fast_calls) == n_minibatches
    assert all(n > 1 for n in fast_calls)

    # Same seed, same weights at start, same rollouts: training must end at the same
    # weights. They are not bit-identical, because a whole-sequence LSTM call groups the float
    # operations differently (observed differences ~1e-8); the tolerance is 100x that, while
    # training moved the weights by far more (checked below), so a wrong reset would show.
    fast_params = fast.policy.state_dict()
    moved = 0.0
    for name, p in stock.policy.state_dict().items():
        assert_close(fast_params[name], p, name)
        moved = max(moved, (p - initial[name]).abs().max().item())
    assert moved > 1e-4
    # And the trained model still acts through the usual API.
    action, state = fast.predict(np.zeros(4, dtype=np.float32), episode_start=np.array([True]))
    assert action.shape == () and state is not None


# -- GRU ---------------------------------------------------------------------------------------


def gru_step(x: th.Tensor, hidden: th.Tensor, gru: nn.GRU) -> tuple[th.Tensor, th.Tensor]:
    """One step of a (multi-layer) GRU written out from its equations (PyTorch's, which are TF2
    Keras' ``reset_after`` GRU): ``r``, ``z`` gates, candidate ``n = tanh(W_in x + b_in + r *
    (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``."""
    layers = []
    for layer in range(gru.num_layers):
        w_ih, w_hh, b_ih, b_hh = (
            getattr(gru, f"{name}_l{layer}")
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        )
        i_r, i_z, i_n = (x @ w_ih.T + b_ih).chunk(3, dim=1)
        h_r, h_z, h_n = (hidden[layer] @ w_hh.T + b_hh).chunk(3, dim=1)
        r = th.sigmoid(i_r + h_r)
        z = th.sigmoid(i_z + h_z)
        x = (1 - z) * th.tanh(i_n + r * h_n) + z * hidden[layer]
        layers.append(x)
    return x, th.stack(layers)


def step_by_step_gru(
    features: th.Tensor,
    states: tuple[th.Tensor, th.Tensor],
    episode_starts: th.Tensor,
    gru: nn.GRU,
) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
    """The reference: :func:`gru_step` one time step at a time, zeroing the state at starts."""
    hidden = states[0]
    n_seq = hidden.shape[1]
    sequence = features.reshape((n_seq, -1, gru.input_size)).swapaxes(0, 1)
    starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)
    outputs = []
    for x, start in zip(sequence, starts, strict=True):
        output, hidden = gru_step(x, (1.0 - start).view(1, n_seq, 1) * hidden, gru)
        outputs.append(output)
    flat = th.flatten(th.stack(outputs).transpose(0, 1), start_dim=0, end_dim=1)
    return flat, (hidden, th.zeros_like(hidden))


class StepByStepGruPolicy(WholeSequenceGruPolicy):
    """The same GRU policy, run through the written-out step-by-step reference."""

    _process_sequence = staticmethod(step_by_step_gru)  # type: ignore[assignment]


def make_gru_pair(
    action_space: spaces.Space, **kwargs: Any
) -> tuple[StepByStepGruPolicy, WholeSequenceGruPolicy]:
    """A reference GRU policy and a WholeSequenceGruPolicy with identical weights."""
    common: dict[str, Any] = {
        "lstm_hidden_size": HIDDEN,
        "net_arch": {"pi": [8], "vf": [8]},
        **kwargs,
    }
    th.manual_seed(0)
    reference = StepByStepGruPolicy(OBS_SPACE, action_space, lambda _: 1e-3, **common)
    fast = WholeSequenceGruPolicy(OBS_SPACE, action_space, lambda _: 1e-3, **common)
    fast.load_state_dict(reference.state_dict())
    return reference, fast


def count_gru_calls(policy: nn.Module) -> list[int]:
    """Record the sequence length of every call to the actor GRU."""
    lengths: list[int] = []

    def hook(_module: nn.Module, args: tuple[th.Tensor, ...]) -> None:
        lengths.append(args[0].shape[0])

    gru = policy.lstm_actor
    assert isinstance(gru, nn.GRU)
    gru.register_forward_pre_hook(hook)
    return lengths


@pytest.mark.parametrize("kwargs", VARIANTS)
def test_gru_policy_builds_grus_and_optimises_them(kwargs: dict[str, Any]) -> None:
    _, fast = make_gru_pair(BOX_ACTIONS, **kwargs)
    assert isinstance(fast.lstm_actor, nn.GRU)
    assert fast.lstm_actor.num_layers == kwargs.get("n_lstm_layers", 1)
    assert fast.lstm_actor.hidden_size == HIDDEN
    critic = fast.lstm_critic
    assert (critic is not None) == kwargs.get("enable_critic_lstm", True)
    assert critic is None or isinstance(critic, nn.GRU)
    assert not any(isinstance(module, nn.LSTM) for module in fast.modules())
    optimised = {id(p) for group in fast.optimizer.param_groups for p in group["params"]}
    assert optimised == {id(p) for p in fast.parameters()}


@pytest.mark.parametrize("action_space", ACTION_SPACES)
@pytest.mark.parametrize("kwargs", VARIANTS)
def test_gru_evaluate_actions_matches_step_by_step(
    action_space: spaces.Space, kwargs: dict[str, Any]
) -> None:
    """Outputs and gradients of the whole-sequence training pass equal the written-out loop."""
    reference, fast = make_gru_pair(action_space, **kwargs)
    rng = np.random.default_rng(123)
    th.manual_seed(123)
    for _ in range(3):
        batch = buffer_batch(reference, rng)
        first_steps = batch[3].reshape(batch[2].pi[0].shape[1], -1)[:, 0]
        assert 0 < first_steps.sum() < len(first_steps)
        calls = count_gru_calls(fast)
        assert_same_evaluation(reference, fast, batch)
        max_length = batch[0].shape[0] // batch[2].pi[0].shape[1]
        assert calls == [max_length]  # one GRU call over the whole padded sequence


@pytest.mark.parametrize("kwargs", VARIANTS)
def test_gru_start_in_the_middle_is_still_exact(kwargs: dict[str, Any]) -> None:
    reference, fast = make_gru_pair(DISCRETE_ACTIONS, **kwargs)
    rng = np.random.default_rng(7)
    th.manual_seed(7)
    obs, actions, states, episode_starts = buffer_batch(reference, rng)
    n_seq = states.pi[0].shape[1]
    starts = episode_starts.reshape(n_seq, -1).clone()
    max_length = starts.shape[1]
    starts[0, max_length // 2] = 1.0
    calls = count_gru_calls(fast)
    assert_same_evaluation(reference, fast, (obs, actions, states, starts.flatten()))
    assert calls == [1] * max_length


@pytest.mark.parametrize("kwargs", VARIANTS)
def test_gru_single_step_predict_matches_step_by_step(kwargs: dict[str, Any]) -> None:
    reference, fast = make_gru_pair(BOX_ACTIONS, **kwargs)
    rng = np.random.default_rng(3)
    n_envs = 4
    state_shape = (reference.lstm_actor.num_layers, n_envs, HIDDEN)
    initial = (rng.normal(size=state_shape), np.zeros(state_shape))
    state_reference: tuple[np.ndarray, ...] | None = initial
    state_fast: tuple[np.ndarray, ...] | None = initial
    for step in range(5):
        obs = rng.uniform(-1, 1, size=(n_envs, *OBS_SPACE.shape)).astype(np.float32)
        episode_start = np.array([step == 0, False, step == 2, True])
        act_ref, state_reference = reference.predict(
            obs, state_reference, episode_start, deterministic=True
        )
        act_fast, state_fast = fast.predict(obs, state_fast, episode_start, deterministic=True)
        assert state_reference is not None and state_fast is not None
        np.testing.assert_allclose(act_fast, act_ref, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(state_fast[0], state_reference[0], rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(state_fast[1], 0.0)  # the unused second state


def test_recurrent_ppo_trains_the_gru_like_the_step_by_step_reference() -> None:
    """Whole training runs through RecurrentPPO's buffer end at the same weights."""

    def train_gru(
        policy_class: type[RecurrentActorCriticPolicy],
    ) -> tuple[RecurrentPPO, dict[str, th.Tensor]]:
        model = RecurrentPPO(
            policy_class,
            "CartPole-v1",
            n_steps=64,
            batch_size=32,
            n_epochs=1,
            seed=0,
            device="cpu",
            policy_kwargs={"lstm_hidden_size": 16, "net_arch": {"pi": [16], "vf": [16]}},
        )
        initial = {name: p.clone() for name, p in model.policy.state_dict().items()}
        model.learn(256)
        return model, initial

    reference, initial = train_gru(StepByStepGruPolicy)
    fast, fast_initial = train_gru(WholeSequenceGruPolicy)
    for name, p in initial.items():
        th.testing.assert_close(fast_initial[name], p, rtol=0, atol=0)  # same start
    fast_params = fast.policy.state_dict()
    moved = 0.0
    for name, p in reference.policy.state_dict().items():
        assert_close(fast_params[name], p, name)
        moved = max(moved, (p - initial[name]).abs().max().item())
    assert moved > 1e-4
