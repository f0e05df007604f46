"""A drop-in recurrent actor-critic policy for sb3-contrib's ``RecurrentPPO`` with a faster update.

``RecurrentPPO`` trains on padded sequences built by ``RecurrentRolloutBuffer``. The stock
``RecurrentActorCriticPolicy._process_sequence`` runs the LSTM one time step at a time (a
Python loop of length ``max_length``) as soon as any sequence in the minibatch contains an
episode start, which in meta-RL (RL², episodes of a few hundred steps, frequent resets) is
almost every minibatch. See https://github.com/Stable-Baselines-Team/stable-baselines3-contrib/issues/113.

The buffer cuts sequences at every episode start (``create_sequencers`` starts a new sequence
wherever ``episode_starts`` or an env change is set) and pads each sequence *at the end* with
zeros (``pad`` uses ``pad_sequence``, ``pad_and_flatten`` keeps that layout for the flags).
So in a training batch an episode start can only sit at position 0 of a sequence. The state
reset then only has to be applied once, to the initial state, and the whole padded batch can
go through a single ``nn.LSTM`` call.

:class:`WholeSequenceGruPolicy` does the same with GRU cells (garage's RL2 policy), keeping
sb3-contrib's ``(h, c)`` state layout with ``c`` unused.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, create_mlp
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

__all__ = ["TanhEncoder", "WholeSequenceGruPolicy", "WholeSequenceLstmPolicy"]

PolicyHead = Literal["linear", "tanh"]
WeightInit = Literal["sb3", "xavier"]
RecurrentBias = Literal["all", "candidate"]


class TanhEncoder(BaseFeaturesExtractor):
    """Tanh layers between the observation and the recurrent cell, every one activated.

    Meta-World+'s RL2 encoder (metaworld-algorithms ``rl/networks.py``
    ``RecurrentContinuousActionPolicy.setup``: ``MLP(depth=2, width=256, activate_last=True)``,
    three tanh layers of 256). Passed to the policy as SB3's ``features_extractor_class``, so the
    rollout, the whole-sequence update and the chunked update all run it before the cell.

    :param sizes: the width of each layer, in order.
    """

    def __init__(self, observation_space: spaces.Space, sizes: tuple[int, ...]) -> None:
        if not sizes:
            raise ValueError("TanhEncoder needs at least one layer width")
        super().__init__(observation_space, features_dim=sizes[-1])
        layers = create_mlp(get_flattened_obs_dim(observation_space), -1, list(sizes), nn.Tanh)
        self.net = nn.Sequential(nn.Flatten(), *layers)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.net(observations)


def xavier_init(policy: RecurrentActorCriticPolicy, gates: int) -> None:
    """Meta-World+'s initialisation of an RL2 policy (metaworld-algorithms
    ``examples/meta_learning/rl2_ml10.py``): Xavier-uniform weights and zero biases in the
    encoder and the action head; in the recurrent cell, Xavier-uniform input kernels and
    orthogonal recurrent kernels, one ``hidden x hidden`` block per gate as Flax's ``GRUCell``
    keeps them (one ``Dense`` per gate), and zero biases.

    :param gates: blocks stacked in the cell's weight matrices (3 for a GRU, 4 for an LSTM).
    """
    modules = [*policy.features_extractor.modules(), policy.action_net]
    for linear in (m for m in modules if isinstance(m, nn.Linear)):
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
    for name, weight in policy.lstm_actor.named_parameters():
        if name.startswith("bias"):
            nn.init.zeros_(weight)
            continue
        init = nn.init.xavier_uniform_ if name.startswith("weight_ih") else nn.init.orthogonal_
        with th.no_grad():
            for block in weight.chunk(gates, dim=0):
                init(block)


def _zero_first(grad: th.Tensor, n: int) -> th.Tensor:
    """``grad`` with its first ``n`` entries set to 0."""
    grad = grad.clone()
    grad[:n] = 0.0
    return grad


def hold_gate_biases_at_zero(gru: nn.RNNBase) -> None:
    """Give ``gru`` the biases of Flax's ``GRUCell`` (Meta-World+): a recurrent bias in the
    candidate gate only. PyTorch's GRU also has one in the reset and update gates, where it adds
    to the input bias and, trained beside it with Adam, moves the gate's total bias twice as far
    per step. Those two blocks are set to 0 and their gradients zeroed, so no optimizer ever moves
    them (Adam's step on a gradient that is always 0 is exactly 0)."""
    gates = 2 * gru.hidden_size  # reset and update blocks first, then the candidate's
    for name, bias in gru.named_parameters():
        if name.startswith("bias_hh"):
            with th.no_grad():
                bias[:gates].zero_()
            bias.register_hook(partial(_zero_first, n=gates))


def _single_layer(lstm: nn.LSTM) -> bool:
    """Whether ``lstm`` is one plain layer, which ``torch.lstm_cell`` can step."""
    return lstm.num_layers == 1 and not lstm.bidirectional and lstm.bias and lstm.proj_size == 0


class WholeSequenceLstmPolicy(RecurrentActorCriticPolicy):
    """``RecurrentActorCriticPolicy`` whose training pass runs each LSTM once over the batch.

    Same constructor, API and parameters as the parent (pass the class itself to
    ``RecurrentPPO``; ``shared_lstm`` and ``enable_critic_lstm`` work as before), and the
    same results up to float32 rounding, several times faster on long sequences with episode
    starts. Only ``_process_sequence`` changes:

    * single-step calls (rollout collection, ``predict``, ``predict_values``): the same step
      through ``torch.lstm_cell``, which has less call overhead than ``nn.LSTM``;
    * training batches whose episode starts are all at position 0 (what the rollout buffer
      produces): initial ``(h, c)`` of sequences that start an episode set to zero, then one
      ``nn.LSTM`` call over the whole padded sequence;
    * any other batch (a start after position 0, e.g. hand-built input): parent's
      step-by-step loop, so an unexpected layout costs speed, never correctness.

    Why it is exact: at step ``t`` the parent feeds ``(1 - start_t) * state`` to the LSTM. For
    ``t > 0`` ``start_t`` is 0 and multiplying by 1.0 leaves the state bit-for-bit unchanged,
    so the loop is one LSTM pass from ``(1 - start_0) * state``. Trailing padding cannot reach
    earlier outputs (the LSTM is causal) and is masked out of the PPO loss; the parent runs
    through it as well, so even the returned final states agree. Any remaining difference
    comes from PyTorch grouping the float operations of a whole-sequence call differently.
    """

    @staticmethod
    def _process_sequence(
        features: th.Tensor,
        lstm_states: tuple[th.Tensor, th.Tensor],
        episode_starts: th.Tensor,
        lstm: nn.LSTM,
    ) -> tuple[th.Tensor, th.Tensor]:
        """Run ``lstm`` over a (padded) batch of sequences, resetting states at episode starts.

        :param features: ``(n_seq * max_length, features_dim)``, sequence-major as built by
            the rollout buffer (``max_length`` is 1 during rollout collection).
        :param lstm_states: ``(h, c)``, each ``(n_layers, n_seq, hidden)``: the states before
            the first step of each sequence.
        :param episode_starts: ``(n_seq * max_length,)`` flags, 1.0 where an episode starts.
        :param lstm: the actor's or critic's LSTM.
        :return: the LSTM output ``(n_seq * max_length, hidden)`` and the final ``(h, c)``
            (the parent annotates the pair of states as one tensor; kept for compatibility).
        """
        n_seq = lstm_states[0].shape[1]
        # (n_seq * max_length,) -> (max_length, n_seq), the parent's layout.
        starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)
        if starts.shape[0] == 1 and _single_layer(lstm):
            # One step (rollout collection, predict): the LSTM cell kernel computes the same
            # step as nn.LSTM at a third of its call overhead (~30 vs ~80 us for 10 x 64).
            keep = (1.0 - starts[0]).view(n_seq, 1)
            weights: list[th.Tensor] = [
                getattr(lstm, name)
                for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
            ]
            h, c = th.lstm_cell(
                features, (keep * lstm_states[0][0], keep * lstm_states[1][0]), *weights
            )
            return h, (h.unsqueeze(0), c.unsqueeze(0))  # type: ignore[return-value]
        if starts.shape[0] <= 1 or bool(th.any(starts[1:] != 0.0)):
            # A start after position 0 cannot come from the rollout buffer; let the parent
            # loop reset the state mid-sequence (and run multi-layer single steps).
            return RecurrentActorCriticPolicy._process_sequence(
                features, lstm_states, episode_starts, lstm
            )
        # (n_seq * max_length, F) -> (n_seq, max_length, F) -> (max_length, n_seq, F)
        features_sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
        keep = (1.0 - starts[0]).view(1, n_seq, 1)
        lstm_output, final_states = lstm(
            features_sequence, (keep * lstm_states[0], keep * lstm_states[1])
        )
        # (max_length, n_seq, hidden) -> (n_seq * max_length, hidden)
        lstm_output = th.flatten(lstm_output.transpose(0, 1), start_dim=0, end_dim=1)
        return lstm_output, final_states


class WholeSequenceGruPolicy(RecurrentActorCriticPolicy):
    """``RecurrentActorCriticPolicy`` with GRU cells instead of LSTMs, trained over whole sequences.

    garage's RL2 examples use a GRU (``GaussianGRUPolicy``, ``garage/tf/policies/
    gaussian_gru_policy.py``: hidden 64 on HalfCheetah; Meta-World+ uses 256); sb3-contrib only
    builds LSTMs. This class keeps sb3-contrib's interfaces so that ``RecurrentPPO`` and its
    rollout buffer work unchanged:

    * the GRUs live under the parent's attribute names (``lstm_actor``, ``lstm_critic``) and are
      built from the same arguments (``lstm_hidden_size``, ``n_lstm_layers``, ``lstm_kwargs``,
      ``shared_lstm``, ``enable_critic_lstm``);
    * the recurrent state stays the parent's ``(h, c)`` pair: ``h`` is the GRU's hidden state and
      ``c`` is unused (always returned as zeros), so buffers and ``predict`` need no change.

    ``_process_sequence`` uses the same whole-sequence scheme as
    :class:`WholeSequenceLstmPolicy`: one ``torch.gru_cell`` step during rollouts, one ``nn.GRU``
    call over a padded training batch whose episode starts are all at position 0 (states reset
    before the call), and a step-by-step loop for any other layout. PyTorch's GRU is the
    ``reset_after`` variant, the one TF2 Keras' ``GRUCell`` (which garage wraps) and Flax's
    ``GRUCell`` (Meta-World+) compute.

    :param head: ``"linear"``: SB3's Gaussian, a linear mean and a learned state-independent
        log-std. ``"tanh"``: Meta-World+'s head (``std_type=MLP_HEAD``, ``activate_head=True``),
        one linear layer giving the mean and the log-std, both through tanh, so the std depends on
        the state and the history and lies in ``[e^-1, e]``; actions are not squashed.
    :param init: ``"sb3"``: SB3's orthogonal initialisation (``ortho_init``) around PyTorch's
        default GRU weights. ``"xavier"``: Meta-World+'s (:func:`xavier_init`).
    :param recurrent_bias: ``"all"``: PyTorch's GRU, a trained recurrent bias in every gate (as
        TF2 Keras' ``GRUCell`` with ``reset_after``, which garage wraps). ``"candidate"``: Flax's
        ``GRUCell`` (Meta-World+), in the candidate gate only (:func:`hold_gate_biases_at_zero`).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        head: PolicyHead = "linear",
        init: WeightInit = "sb3",
        recurrent_bias: RecurrentBias = "all",
        **kwargs: Any,
    ) -> None:
        if head not in ("linear", "tanh") or init not in ("sb3", "xavier"):
            raise ValueError(f"head must be 'linear' or 'tanh' and init 'sb3' or 'xavier', got "
                             f"{head!r} and {init!r}")  # fmt: skip
        if recurrent_bias not in ("all", "candidate"):
            raise ValueError(f"recurrent_bias must be 'all' or 'candidate', got {recurrent_bias!r}")
        self.head = head
        self.init = init
        self.recurrent_bias = recurrent_bias
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)
        self.lstm_actor = self._gru_like(self.lstm_actor)  # type: ignore[assignment]
        if self.lstm_critic is not None:
            self.lstm_critic = self._gru_like(self.lstm_critic)  # type: ignore[assignment]
        if head == "tanh":
            if not isinstance(action_space, spaces.Box):
                raise ValueError(f"head='tanh' needs a Box action space, got {action_space}")
            actions = int(action_space.shape[0])
            self.action_net = nn.Linear(self.mlp_extractor.latent_dim_pi, 2 * actions)
            del self.log_std  # the head gives the log-std
        if init == "xavier":
            xavier_init(self, gates=3)
        if recurrent_bias == "candidate":
            for gru in (self.lstm_actor, self.lstm_critic):
                if gru is not None:
                    hold_gate_biases_at_zero(gru)
        # The parent built its optimizer over the LSTMs' parameters: build it again.
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(),
            "head": self.head,
            "init": self.init,
            "recurrent_bias": self.recurrent_bias,
        }

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> Distribution:
        """SB3's Gaussian, or with ``head="tanh"`` the mean and log-std from one tanh head."""
        if self.head == "linear":
            return super()._get_action_dist_from_latent(latent_pi)
        mean, log_std = th.tanh(self.action_net(latent_pi)).chunk(2, dim=-1)
        return self.action_dist.proba_distribution(mean, log_std)

    def _gru_like(self, lstm: nn.Module) -> nn.GRU:
        """A GRU with the input size, width and layers of the parent's ``lstm``."""
        assert isinstance(lstm, nn.LSTM)
        return nn.GRU(
            lstm.input_size, lstm.hidden_size, num_layers=lstm.num_layers, **self.lstm_kwargs
        )

    @staticmethod
    def _process_sequence(  # type: ignore[override]
        features: th.Tensor,
        lstm_states: tuple[th.Tensor, th.Tensor],
        episode_starts: th.Tensor,
        lstm: nn.GRU,
    ) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
        """Run the GRU over a (padded) batch of sequences, resetting states at episode starts.

        :param features: ``(n_seq * max_length, features_dim)``, sequence-major.
        :param lstm_states: ``(h, c)``, each ``(n_layers, n_seq, hidden)``; ``c`` is ignored.
        :param episode_starts: ``(n_seq * max_length,)`` flags, 1.0 where an episode starts.
        :param lstm: the actor's or critic's GRU (the parent's parameter name).
        :return: the GRU output ``(n_seq * max_length, hidden)`` and the final ``(h, zeros)``.
        """
        hidden = lstm_states[0]
        n_seq = hidden.shape[1]
        starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)  # (max_length, n_seq)
        if starts.shape[0] == 1 and lstm.num_layers == 1 and lstm.bias and not lstm.bidirectional:
            keep = (1.0 - starts[0]).view(n_seq, 1)
            weights: list[th.Tensor] = [
                getattr(lstm, name)
                for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
            ]
            h = th.gru_cell(features, keep * hidden[0], *weights)
            h_n = h.unsqueeze(0)
            return h, (h_n, th.zeros_like(h_n))
        features_sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
        if bool(th.any(starts[1:] != 0.0)):
            # A start after position 0 (not from the rollout buffer): one step at a time.
            outputs = []
            for step_features, start in zip(features_sequence, starts, strict=True):
                output, hidden = lstm(
                    step_features.unsqueeze(0), (1.0 - start).view(1, n_seq, 1) * hidden
                )
                outputs.append(output)
            gru_output = th.cat(outputs)
        else:
            gru_output, hidden = lstm(
                features_sequence, (1.0 - starts[0]).view(1, n_seq, 1) * hidden
            )
        # (max_length, n_seq, hidden) -> (n_seq * max_length, hidden)
        gru_output = th.flatten(gru_output.transpose(0, 1), start_dim=0, end_dim=1)
        return gru_output, (hidden, th.zeros_like(hidden))
