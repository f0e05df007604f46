"""Every PEARL hyperparameter in one place, with its default, range and documentation.

Defaults are oyster's (``configs/default.py`` with ``configs/cheetah-vel.json``, the code behind
the PEARL paper's numbers): ``baselines/pearl.toml`` names the source of each benchmark's values
and ``docs/fidelity.md`` (section 6) compares them with garage's examples.
"""

from __future__ import annotations

import dataclasses

from metabench.validation import MAX_COUNT, MAX_LAYER_WIDTH, MAX_REPLAY_BUFFER, check_config, option

__all__ = ["PEARLConfig"]


@dataclasses.dataclass(frozen=True)
class PEARLConfig:
    """Every PEARL hyperparameter (oyster's names in the docs; garage's are the same)."""

    n_train_tasks: int = option(
        100,
        "training tasks, drawn once from the benchmark's training distribution",
        low=1,
        high=MAX_COUNT,
    )
    latent_size: int = option(5, "dimension of the task variable z", low=1, high=MAX_LAYER_WIDTH)
    hidden_sizes: tuple[int, ...] = option(
        (300, 300, 300),
        "hidden layers (ReLU) of the policy, both Q-functions and V",
        low=1,
        high=MAX_LAYER_WIDTH,
    )
    encoder_hidden_sizes: tuple[int, ...] = option(
        (200, 200, 200),
        "hidden layers (ReLU) of the context encoder",
        low=1,
        high=MAX_LAYER_WIDTH,
    )
    meta_batch_size: int = option(
        16, "tasks per gradient step (oyster's meta_batch)", low=1, high=MAX_COUNT
    )
    num_initial_steps: int = option(
        2000,
        "env steps per training task collected with z from the prior before training (every "
        "task's buffers need data before the first gradient step)",
        low=1, high=MAX_COUNT,
    )  # fmt: skip
    num_tasks_sample: int = option(
        5,
        "tasks (drawn with replacement) that collect new data each iteration",
        low=1,
        high=MAX_COUNT,
    )
    num_steps_prior: int = option(
        400,
        "env steps per sampled task with z from the prior (encoder and RL data)",
        low=0,
        high=MAX_COUNT,
    )
    num_steps_posterior: int = option(
        0,
        "env steps per sampled task with z from the posterior (encoder and RL data)",
        low=0,
        high=MAX_COUNT,
    )
    num_extra_rl_steps_posterior: int = option(
        600,
        "env steps per sampled task with z from the posterior, for the RL buffers only (the "
        "policy must learn to act on posterior samples; the encoder is trained on prior data)",
        low=0,
        high=MAX_COUNT,
    )
    num_train_steps_per_itr: int = option(2000, "gradient steps per iteration", low=1)
    batch_size: int = option(256, "transitions per task in the RL batch", low=1, high=MAX_COUNT)
    embedding_batch_size: int = option(
        100,
        "transitions per task in the context the encoder sees in training",
        low=1,
        high=MAX_COUNT,
    )
    use_next_obs_in_context: bool = option(
        False,
        "each context transition carries the observation it reached, [o, a, r, o'], not only "
        "[o, a, r]: oyster sets it where the tasks differ in their dynamics (Walker- and "
        "Hopper-Rand-Params)",
        recorded_at_default=False,
    )
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    soft_target_tau: float = option(
        0.005, "Polyak rate of the target V-function", low=0.0, high=1.0, low_open=True
    )
    policy_lr: float = option(3e-4, "Adam step size of the policy", low=0.0, low_open=True)
    qf_lr: float = option(3e-4, "Adam step size of the Q-functions", low=0.0, low_open=True)
    vf_lr: float = option(3e-4, "Adam step size of the V-function", low=0.0, low_open=True)
    context_lr: float = option(3e-4, "Adam step size of the encoder", low=0.0, low_open=True)
    reward_scale: float = option(
        5.0,
        "multiplies the reward in the Bellman target (not in the context): the inverse of SAC's "
        "entropy weight",
        low=0.0,
        low_open=True,
    )
    kl_lambda: float = option(
        0.1, "weight of KL(q(z|c) || N(0, I)), summed over tasks and latent dimensions", low=0.0
    )
    policy_mean_reg_weight: float = option(
        1e-3, "weight of the mean squared pre-tanh action mean in the policy loss", low=0.0
    )
    policy_std_reg_weight: float = option(
        1e-3, "weight of the mean squared log-std in the policy loss", low=0.0
    )
    replay_buffer_size: int = option(
        1_000_000,
        "capacity of each training task's RL buffer in transitions (oldest dropped first); "
        "encoder buffers hold at most one collection round",
        low=1,
        high=MAX_REPLAY_BUFFER,
    )
    exploration_prior_episodes: int = option(
        1,
        "meta-test exploration episodes that act with z from the prior; after them z is drawn "
        "at each episode start from the posterior of every exploration transition so far "
        "(oyster's num_exp_traj_eval)",
        low=1,
    )
    deterministic_eval: bool = option(
        True,
        "act with tanh of the mean action in every meta-test episode; exploration then comes "
        "from sampling z (oyster's eval_deterministic)",
    )
    update_threads: int = option(
        1,
        "torch threads of the gradient steps; thread counts can change the last bits of the "
        "numbers, hence a recorded hyperparameter",
        low=1,
    )
    critic_reward: str = option(
        "",
        "the step info key whose value the critic trains on, in place of the env's reward "
        "(which the context, the returns and the success still use): 'reward_dense' on a "
        "sparse task trains the critic on the dense reward, as oyster's sparse_rewards does; "
        "'' trains it on the env's reward",
        recorded_at_default=False,
    )

    def __post_init__(self) -> None:
        check_config(self)
        if self.num_steps_prior + self.num_steps_posterior == 0:
            raise ValueError(
                "a sampled task's encoder buffer is emptied and refilled with its prior and "
                "posterior steps: set num_steps_prior or num_steps_posterior above 0"
            )
