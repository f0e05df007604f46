"""Meta-World+'s RL2 network and evaluation (``baselines/rl2-ppo-metaworld.toml``), each piece
against an independent computation: the encoder, GRU and tanh head forward against a NumPy loop
written from the equations and against Meta-World+'s own Flax network, the std's range, the
initialisation, the mode in test episodes and the hidden state restored at each of them."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

import metabench  # noqa: F401 - registers the metabench/* ids
from metabench.algos.rl2 import TanhEncoder, WholeSequenceGruPolicy
from metabench.algos.rl2.chunked_update import chunk_pass, chunked_train
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.algos.rl2.rl2_trpo import RL2TRPOConfig
from metabench.algos.rl2.update_context import UpdateContext
from metabench.validation import ConfigError
from scripts.metaworld_plus_run import flax_named, load_flax_parameters, swap_layout

ENCODER = (8, 7, 5)
HIDDEN = 6
PARITY: dict[str, Any] = {
    "encoder_sizes": ENCODER,
    "hidden_size": HIDDEN,
    "recurrent_cell": "gru",
    "policy_head": "tanh",
    "weight_init": "xavier",
    "meta_batch_size": 2,
}


def parity_algo(**overrides: Any) -> RL2PPO:
    return RL2PPO("metabench/PointGoal-v0", config=RL2PPOConfig(**{**PARITY, **overrides}), seed=1)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def numpy_forward(
    weights: dict[str, np.ndarray], observations: np.ndarray, hidden: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, std and the last hidden state of one sequence ``(T, obs)``, step by step, from the
    equations: three tanh layers, PyTorch's (reset-after) GRU, tanh on the head, split."""
    means, stds = [], []
    h = hidden.astype(np.float64)
    for x in observations.astype(np.float64):
        for layer in ("0", "2", "4"):  # Linear, Tanh, Linear, Tanh, Linear, Tanh after Flatten
            x = np.tanh(weights[f"features_extractor.net.{int(layer) + 1}.weight"] @ x
                        + weights[f"features_extractor.net.{int(layer) + 1}.bias"])  # fmt: skip
        w_ih, w_hh = weights["lstm_actor.weight_ih_l0"], weights["lstm_actor.weight_hh_l0"]
        b_ih, b_hh = weights["lstm_actor.bias_ih_l0"], weights["lstm_actor.bias_hh_l0"]
        gi, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
        r = sigmoid(gi[:HIDDEN] + gh[:HIDDEN])
        z = sigmoid(gi[HIDDEN : 2 * HIDDEN] + gh[HIDDEN : 2 * HIDDEN])
        n = np.tanh(gi[2 * HIDDEN :] + r * gh[2 * HIDDEN :])
        h = (1.0 - z) * n + z * h
        head = np.tanh(weights["action_net.weight"] @ h + weights["action_net.bias"])
        mean, log_std = np.split(head, 2)
        means.append(mean)
        stds.append(np.exp(log_std))
    return np.array(means), np.array(stds), h


def policy_weights(algo: RL2PPO) -> dict[str, np.ndarray]:
    return {k: v.detach().double().numpy() for k, v in algo.model.policy.state_dict().items()}


def test_encoder_gru_head_forward_matches_a_numpy_loop() -> None:
    algo = parity_algo()
    policy = algo.model.policy
    rng = np.random.default_rng(0)
    n_seq, length = 3, 9
    obs_dim = policy.observation_space.shape[0]
    observations = rng.normal(size=(n_seq, length, obs_dim)).astype(np.float32)
    hidden0 = rng.normal(size=(n_seq, HIDDEN)).astype(np.float32) * 0.5
    weights = policy_weights(algo)
    # the training pass: every sequence at once, one GRU call (no episode start inside)
    flat = th.as_tensor(observations.reshape(n_seq * length, obs_dim))
    state = th.as_tensor(hidden0)[None]
    with th.no_grad():
        dist, _ = policy.get_distribution(
            flat, (state, th.zeros_like(state)), th.zeros(n_seq * length)
        )
    mean = dist.distribution.mean.numpy().reshape(n_seq, length, -1)
    std = dist.distribution.stddev.numpy().reshape(n_seq, length, -1)
    for i in range(n_seq):
        expected_mean, expected_std, _ = numpy_forward(weights, observations[i], hidden0[i])
        np.testing.assert_allclose(mean[i], expected_mean, atol=2e-6)
        np.testing.assert_allclose(std[i], expected_std, atol=2e-6)
    # the rollout: one step at a time, the state carried by the policy
    states = (state[:, :1], th.zeros_like(state[:, :1]))
    expected_mean, _, expected_h = numpy_forward(weights, observations[0], hidden0[0])
    for t in range(length):
        with th.no_grad():
            step, states = policy.get_distribution(
                th.as_tensor(observations[0, t : t + 1]), states, th.zeros(1)
            )
        np.testing.assert_allclose(step.distribution.mean.numpy()[0], expected_mean[t], atol=2e-6)
    np.testing.assert_allclose(states[0].numpy()[0, 0], expected_h, atol=2e-6)


DATA = Path(__file__).parents[2] / "data"
METAWORLD_PLUS = DATA / "metaworld_plus_rl2_network.npz"
"""Meta-World+'s own RL2 network, computed with its code: metaworld-algorithms at a2abf6a3bb1e
(``rl/networks.py`` ``RecurrentContinuousActionPolicy``, the config of
``examples/meta_learning/rl2_ml1.py`` narrowed to 16 units), JAX 0.6.0 and Flax 0.10.6 on the CPU,
initialised at ``PRNGKey(0)`` and its zero biases then offset by N(0, 0.1) so that they count. For
12 steps of 3 trials of random 7-dimensional observations from a zero carry: ``param/*`` its
parameters, ``log_prob``, ``mean`` and ``std`` of fixed random actions (``(T, trials, ...)``),
and ``grad/*`` the gradient of the summed log-probability."""

METAWORLD_PLUS_UPDATE = DATA / "metaworld_plus_rl2_update.npz"
"""One whole update of Meta-World+'s own RL2 (``RL2.update`` at a2abf6a3bb1e: overlapping chunks,
one clipped-surrogate step with the entropy bonus per chunk per epoch, global-norm clipping 1.0,
Adam 5e-4), the config of ``rl2_ml1.py`` narrowed to 16 units, chunks of 20 overlapping 5 and 2
epochs (6 steps), initialised at seed 0 with its biases offset by N(0, 0.1). On a 50-step rollout
of 3 tasks (ML1's 45-dim observations N(0, 1), actions sampled from that policy, rewards
U(0, 10)): ``obs``, ``actions``, ``log_prob``, ``rewards``, its ``advantages``, the parameters
before (``param/*``) and after (``updated/*``), and its logged means of the policy loss, entropy
and clipped fraction (``log/*``)."""


def metaworld_plus_policy(
    ref: Any, recurrent_bias: str = "candidate", learning_rate: float = 1e-3
) -> WholeSequenceGruPolicy:
    """Meta-World+'s network as a metabench policy, with the parameters ``ref["param/*"]``
    copied in: Flax keeps one Dense per GRU gate, the reset and update gates without a recurrent
    bias; PyTorch stacks them r, z, n."""
    width = ref["param/cell/hn/bias"].shape[0]
    obs_dim = ref["obs"].shape[-1]
    space = spaces.Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float32)
    policy = WholeSequenceGruPolicy(
        space, spaces.Box(-1.0, 1.0, shape=(ref["actions"].shape[-1],)), lambda _: learning_rate,
        lstm_hidden_size=width, net_arch={"pi": [], "vf": []}, enable_critic_lstm=False,
        features_extractor_class=TanhEncoder, features_extractor_kwargs={"sizes": [width] * 3},
        head="tanh", init="xavier", recurrent_bias=recurrent_bias,
    )  # fmt: skip
    load_flax_parameters(policy, ref)
    return policy


def test_forward_and_gradient_match_metaworld_plus_own_network() -> None:
    """With Meta-World+'s parameters copied in, the chunked update's pass gives its
    log-probabilities, means, stds and gradients."""
    ref = np.load(METAWORLD_PLUS, allow_pickle=False)
    steps, trials, obs_dim = ref["obs"].shape
    width = ref["param/cell/hn/bias"].shape[0]
    policy = metaworld_plus_policy(ref)
    gru = policy.lstm_actor
    # (trials, T, ...), as the update has them
    observations = th.as_tensor(ref["obs"]).transpose(0, 1)
    actions = th.as_tensor(ref["actions"]).transpose(0, 1)
    zero = th.zeros(1, trials, width)
    log_prob, _, _ = chunk_pass(
        policy, observations, actions, th.zeros(trials, steps), (zero, zero), carry_at=steps
    )
    log_prob.sum().backward()

    def as_reference(x: th.Tensor) -> np.ndarray:  # (trials * T, ...) -> (T, trials, ...)
        return x.detach().reshape(trials, steps, -1).transpose(0, 1).squeeze(-1).numpy()

    np.testing.assert_allclose(as_reference(log_prob), ref["log_prob"], rtol=1e-5, atol=1e-5)
    with th.no_grad():  # the mean and std: the encoder, one GRU call over the chunk, the head
        flat = observations.transpose(0, 1).reshape(-1, obs_dim)  # (T * trials, obs)
        features = policy.extract_features(flat).reshape(steps, trials, width)
        latent = gru(features, zero)[0].reshape(steps * trials, width)
        distribution = policy._get_action_dist_from_latent(latent).distribution
    np.testing.assert_allclose(
        distribution.mean.reshape(ref["mean"].shape).numpy(), ref["mean"], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        distribution.stddev.reshape(ref["std"].shape).numpy(), ref["std"], rtol=1e-5, atol=1e-6
    )
    grads = flax_named(policy, of=lambda p: p.grad)
    assert {f"grad/{name}" for name in grads} == {k for k in ref.files if k.startswith("grad/")}
    for name, grad in grads.items():
        expected = ref[f"grad/{name}"]
        grad = swap_layout(name, grad)
        tolerance = 1e-5 * float(np.abs(expected).max())
        np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-4, atol=tolerance, err_msg=name)


def run_metaworld_plus_update(recurrent_bias: str) -> tuple[WholeSequenceGruPolicy, Any, Any]:
    """The chunked update with Meta-World+'s settings on the update reference's rollout and
    advantages, from its initial parameters; returns the policy, the reference and the stats."""
    ref = np.load(METAWORLD_PLUS_UPDATE, allow_pickle=False)
    steps, tasks = ref["obs"].shape[:2]
    width = ref["param/cell/hn/bias"].shape[0]
    policy = metaworld_plus_policy(ref, recurrent_bias, learning_rate=5e-4)
    starts = np.zeros((steps, tasks), np.float32)
    starts[0] = 1.0  # one trial: the state carries across its inner episodes
    zeros = np.zeros((steps, 1, tasks, width), np.float32)
    buffer = SimpleNamespace(
        rewards=ref["rewards"], observations=ref["obs"], actions=ref["actions"],
        episode_starts=starts, log_probs=ref["log_prob"], advantages=ref["advantages"],
        hidden_states_pi=zeros, cell_states_pi=zeros,
    )  # fmt: skip
    context = UpdateContext(
        policy=policy, buffer=buffer, device=th.device("cpu"), n_epochs=2, batch_size=None,  # type: ignore[arg-type]
        clip_range=0.2, clip_range_vf=None, ent_coef=5e-3, vf_coef=0.5, max_grad_norm=1.0,
        normalize_advantage=False, target_kl=None,
    )  # fmt: skip
    return policy, ref, chunked_train(context, chunk_length=20, overlap=5)


def largest_miss(policy: WholeSequenceGruPolicy, ref: Any) -> float:
    """The largest distance of a parameter from where Meta-World+'s update took it, as a fraction
    of how far that update moved the parameter's array; the reset and update gates' recurrent
    biases, which Flax has not, count against their start, 0."""
    misses = []
    for name, tensor in flax_named(policy).items():
        value = swap_layout(name, tensor.detach().numpy())
        move = np.abs(ref[f"updated/{name}"] - ref[f"param/{name}"]).max()
        misses.append(np.abs(value - ref[f"updated/{name}"]).max() / move)
    gru = policy.lstm_actor
    typical = np.abs(ref["updated/cell/hn/bias"] - ref["param/cell/hn/bias"]).max()
    misses.append(float(gru.bias_hh_l0[: 2 * gru.hidden_size].detach().abs().max()) / typical)
    return float(max(misses))


def test_chunked_update_takes_metaworld_plus_own_update_step_by_step() -> None:
    """rl2-ppo-metaworld's update (gru_recurrent_bias='candidate') ends where Meta-World+'s own
    update ends, to float32 rounding, after 6 Adam steps over 3 overlapping chunks; its logged
    policy loss, entropy and clipped fraction are Meta-World+'s. With PyTorch's recurrent biases
    in every gate, the reset and update gates' move a full step each time instead."""
    policy, ref, stats = run_metaworld_plus_update("candidate")
    assert largest_miss(policy, ref) < 1e-3
    assert stats.policy == pytest.approx(float(ref["log/policy_loss"]), rel=1e-4)
    assert -stats.entropy == pytest.approx(float(ref["log/entropy_loss"]), rel=1e-5)
    assert stats.clip_fraction == pytest.approx(float(ref["log/clip_fracs"]), abs=1e-6)
    torch_policy, _, _ = run_metaworld_plus_update("all")
    assert largest_miss(torch_policy, ref) > 0.5


def test_tanh_head_std_depends_on_state_and_stays_in_its_range() -> None:
    algo = parity_algo()
    policy = algo.model.policy
    assert not hasattr(policy, "log_std"), "the head gives the log-std: no free parameter"
    with th.no_grad():
        policy.action_net.weight.mul_(200.0)  # saturate the tanh both ways
    observations = th.as_tensor(
        np.random.default_rng(1).normal(size=(400, 6)) * 3, dtype=th.float32
    )
    state = th.zeros(1, 400, HIDDEN)
    with th.no_grad():
        dist, _ = policy.get_distribution(observations, (state, state), th.ones(400))
    std, mean = dist.distribution.stddev, dist.distribution.mean
    assert float(std.min()) >= math.exp(-1) - 1e-6 and float(std.max()) <= math.e + 1e-6
    assert float(std.min()) < math.exp(-1) + 0.05 and float(std.max()) > math.e - 0.05
    assert float(mean.abs().max()) <= 1.0
    assert float(std[:, 0].std()) > 0.1, "the std must vary with the state"


def test_xavier_init_is_metaworld_plus() -> None:
    policy = parity_algo(encoder_sizes=(64, 64, 64), hidden_size=32).model.policy
    linears = [m for m in policy.features_extractor.modules() if isinstance(m, th.nn.Linear)]
    assert [m.out_features for m in linears] == [64, 64, 64]
    for linear in [*linears, policy.action_net]:
        fan_out, fan_in = linear.weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        w = linear.weight.detach().abs()
        assert float(w.max()) <= bound and float(w.max()) > 0.8 * bound
        assert float(linear.bias.detach().abs().max()) == 0.0
    gru = policy.lstm_actor
    for block in gru.weight_hh_l0.detach().chunk(3):  # one orthogonal matrix per gate
        np.testing.assert_allclose((block @ block.T).numpy(), np.eye(32), atol=1e-5)
    for block in gru.weight_ih_l0.detach().chunk(3):  # Xavier per gate: fan_in 64, fan_out 32
        bound = math.sqrt(6.0 / (64 + 32))
        assert float(block.abs().max()) <= bound and float(block.abs().max()) > 0.8 * bound
    assert (
        float(gru.bias_ih_l0.detach().abs().max())
        == float(gru.bias_hh_l0.detach().abs().max())
        == 0.0
    )


def test_deterministic_test_samples_exploration_then_restarts_each_test_from_the_snapshot() -> None:
    algo = parity_algo(deterministic_test=True)
    policy = algo.model.policy
    explore = algo.get_exploration_policy()
    rng = np.random.default_rng(2)
    obs_dim = policy.observation_space.shape[0]
    observations = rng.normal(size=(5, obs_dim)).astype(np.float32)
    sampled = [explore.get_action(o) for o in observations]
    snapshot = explore._state
    assert snapshot is not None
    adapted = algo.adapt_policy(explore, None)  # type: ignore[arg-type]

    def mode_from(state: tuple[np.ndarray, ...], obs: np.ndarray) -> tuple[np.ndarray, Any]:
        h = th.as_tensor(state[0])
        with th.no_grad():
            dist, (h, c) = policy.get_distribution(
                th.as_tensor(obs[None]), (h, th.zeros_like(h)), th.zeros(1)
            )
        return np.clip(dist.distribution.mean.numpy()[0], -1, 1), (h.numpy(), c.numpy())

    for _ in range(3):  # each test episode starts from the state exploration ended with
        adapted.reset()
        state: tuple[np.ndarray, ...] = snapshot
        for obs in observations:
            expected, state = mode_from(state, obs)
            np.testing.assert_allclose(adapted.get_action(obs), expected, atol=1e-6)
    # exploration sampled: its actions are not the modes along its own path
    state = (np.zeros_like(snapshot[0]), np.zeros_like(snapshot[1]))
    modes = []
    for obs in observations:
        mode, state = mode_from(state, obs)
        modes.append(mode)
    assert not np.allclose(np.array(sampled), np.array(modes), atol=1e-3)


def test_deterministic_test_in_the_batched_policies() -> None:
    algo = parity_algo(deterministic_test=True)
    rows = np.arange(3)
    obs = np.random.default_rng(3).normal(size=(3, 6)).astype(np.float32)
    batch = algo.get_exploration_policies(3)
    first = batch.get_actions(obs, rows)
    assert not np.allclose(first, batch.get_actions(obs, rows)), "exploration samples"
    adapted = algo.adapt_policies(batch, [])
    adapted.reset(rows)
    one = adapted.get_actions(obs, rows)
    adapted.reset(rows)
    np.testing.assert_array_equal(adapted.get_actions(obs, rows), one)  # mode, same snapshot


@pytest.mark.parametrize("config_class", [RL2PPOConfig, RL2TRPOConfig])
def test_tanh_head_and_xavier_need_the_gru(config_class: type) -> None:
    with pytest.raises(ValueError, match="recurrent_cell='gru'"):
        config_class(recurrent_cell="lstm", policy_head="tanh")
    with pytest.raises(ConfigError):
        config_class(encoder_sizes=(0,))


def test_the_encoder_works_with_the_lstm_and_the_chunked_update_trains_the_parity_network() -> None:
    lstm = RL2PPO(
        "metabench/PointGoal-v0",
        config=RL2PPOConfig(encoder_sizes=(5,), hidden_size=4, meta_batch_size=2),
    )
    assert lstm.model.policy.lstm_actor.input_size == 5
    algo = parity_algo(value_baseline="linear", chunk_length=10, chunk_overlap=2)
    before = {k: v.clone() for k, v in algo.model.policy.state_dict().items()}
    algo.train(1)
    after = algo.model.policy.state_dict()
    for name in ("features_extractor.net.1.weight", "lstm_actor.weight_hh_l0", "action_net.weight"):
        assert not th.equal(before[name], after[name]), f"{name} was not trained"


@pytest.mark.parametrize("config_class", [RL2PPOConfig, RL2TRPOConfig])
def test_flax_gate_biases_need_the_gru(config_class: type) -> None:
    with pytest.raises(ValueError, match="recurrent_cell='gru'"):
        config_class(recurrent_cell="lstm", gru_recurrent_bias="candidate")


@pytest.mark.parametrize("gru_recurrent_bias", ["candidate", "all"])
def test_training_moves_the_reset_and_update_gates_recurrent_biases_only_with_all(
    gru_recurrent_bias: str,
) -> None:
    """A real iteration (rollout, chunked update): with ``"candidate"`` the reset and update
    gates' recurrent biases stay exactly 0 while the candidate's and every input bias train."""
    algo = parity_algo(
        value_baseline="linear", chunk_length=10, chunk_overlap=2,
        gru_recurrent_bias=gru_recurrent_bias,
    )  # fmt: skip
    policy = algo.model.policy
    assert policy._get_constructor_parameters()["recurrent_bias"] == gru_recurrent_bias
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    algo.train(1)
    after = policy.state_dict()
    gates = slice(0, 2 * HIDDEN)
    candidate = slice(2 * HIDDEN, 3 * HIDDEN)
    assert not th.equal(before["lstm_actor.bias_ih_l0"], after["lstm_actor.bias_ih_l0"])
    assert not th.equal(
        before["lstm_actor.bias_hh_l0"][candidate], after["lstm_actor.bias_hh_l0"][candidate]
    )
    held = after["lstm_actor.bias_hh_l0"][gates]
    if gru_recurrent_bias == "candidate":
        assert th.equal(held, th.zeros_like(held))
    else:
        assert held.abs().min() > 0
