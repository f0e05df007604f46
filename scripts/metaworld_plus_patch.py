"""Patch a checkout of Meta-World+'s code (metaworld-algorithms at a2abf6a3bb1e) so that its RL2
runs on a CPU-only machine in resumable pieces, with its training success printed per iteration.

    python scripts/metaworld_plus_patch.py PATH/TO/metaworld-algorithms

None of the patches changes a number of training: the same seed gives the same updates. They are
what this repository's comparisons with Meta-World+'s RL2 ran with (``docs/fidelity.md`` §4):

- the accelerator check is off, so JAX runs on the CPU (``JAX_PLATFORMS=cpu``);
- ``--resume`` restarts RL2 at the iteration after the saved one (at a2abf6a3bb1e the loop
  starts at ``range(start_step, ...)`` with the saved *step* count, past its end, so a resumed
  run ends at once);
- each iteration prints ``- Train success:`` (episodes that succeed at any step, over all
  sub-envs) and the same per sub-env;
- ``W_SKIP_EVAL=1`` with ``W_CKPT_EVERY=N`` checkpoints every N iterations without the test-set
  evaluation (and skips the final one): the checkpoints are meta-tested by ``metabench evaluate``
  (``scripts/metaworld_plus_params.py``, then ``scripts/metaworld_plus_run.py``);
- ``W_STOP_STEPS=S`` ends the run after S environment steps.

A checkpoint is named by the step count at the start of the iteration that saved it: after 20
iterations of 100,000 steps (ML10), ``checkpoints/1900000`` holds the network trained on 2e6.
Run on ML10 from the patched checkout, in its own environment (the versions its ``uv.lock`` pins)::

    JAX_PLATFORMS=cpu W_STOP_STEPS=2000000 W_SKIP_EVAL=1 W_CKPT_EVERY=2 PYTHONPATH=$PWD \\
        python examples/meta_learning/rl2_ml10.py --seed 0 --data-dir RUNS --resume

Each patch replaces text that occurs exactly once where it is applied; on any other checkout (or
one already patched) the script stops before writing anything and names the text it missed.
"""

# ruff: noqa: E501  (the patched lines are Meta-World+'s code, at its line length, byte for byte as run)
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from metabench.atomic import atomic_write_bytes

RUN = "metaworld_algorithms/run.py"
BASE = "metaworld_algorithms/rl/algorithms/base.py"

CPU_OLD = '        if jax.device_count("gpu") < 1 and jax.device_count("tpu") < 1:'
CPU_NEW = (
    '        if False and jax.device_count("gpu") < 1 and jax.device_count("tpu") < 1:'
    "  # local: JAX on the CPU"
)
FINAL_EVAL_OLD = """        # Cleanup
        if self.checkpoint:"""
FINAL_EVAL_NEW = """        # Cleanup
        import os  # local: no final test-set evaluation with W_SKIP_EVAL=1
        if self.checkpoint and os.environ.get("W_SKIP_EVAL") != "1":"""

# (old, new) in the RNN-based algorithms' ``train``; the last one's text also occurs earlier in
# the method, so it replaces the last occurrence (the end of the iteration).
RL2_LOOP: list[tuple[str, str]] = [
    (
        """        for _iter in range(
            start_step, config.total_steps // steps_per_iter
        ):  # Outer step""",
        """        import os  # local: resume, stop and logging patches
        first_iter = start_step // steps_per_iter + 1 if start_step else 0
        stop_steps = int(os.environ.get("W_STOP_STEPS", config.total_steps))
        skip_eval = os.environ.get("W_SKIP_EVAL") == "1"
        ckpt_every = int(os.environ.get("W_CKPT_EVERY", "0"))
        for _iter in range(
            first_iter, config.total_steps // steps_per_iter
        ):  # Outer step""",
    ),
    (
        """            episode_started = np.ones((envs.num_envs,))

            while not rollout_buffer.ready:""",
        """            episode_started = np.ones((envs.num_envs,))
            ep_success = np.zeros((envs.num_envs,), dtype=bool)
            successes_by_env = [[] for _ in range(envs.num_envs)]

            while not rollout_buffer.ready:""",
    ),
    (
        """                episode_started = np.logical_or(terminations, truncations)
                obs = next_obs""",
        """                episode_started = np.logical_or(terminations, truncations)
                step_success = np.asarray(infos.get("success", np.zeros(envs.num_envs)), dtype=float) > 0
                if episode_started.any():
                    final_success = np.asarray(infos["final_info"]["success"], dtype=float) > 0
                    step_success = np.where(episode_started, final_success, step_success)
                ep_success |= step_success
                for i in np.flatnonzero(episode_started):
                    successes_by_env[i].append(bool(ep_success[i]))
                    ep_success[i] = False
                obs = next_obs""",
    ),
    (
        """            rollouts = rollout_buffer.get()
""",
        """            rollouts = rollout_buffer.get()
            print("- Train success:", float(np.mean([x for v in successes_by_env for x in v])),
                  "per env:", [round(float(np.mean(v)), 2) for v in successes_by_env], flush=True)
""",
    ),
    (
        """            if global_step % config.evaluation_frequency == 0 and global_step > 0:
                print("- Evaluating on the test set...")""",
        """            if skip_eval and ckpt_every and (_iter + 1) % ckpt_every == 0 and checkpoint_manager is not None:
                checkpoint_manager.save(
                    global_step,
                    args=get_checkpoint_save_args(self, envs, global_step, episodes_ended, run_timestamp),
                    # no evaluation: the step as the retention metric keeps the latest checkpoints
                    metrics={"mean_success_rate": float(global_step)},
                )
                checkpoint_manager.wait_until_finished()
                print("- Saved Model (no evaluation)", flush=True)
            if global_step % config.evaluation_frequency == 0 and global_step > 0 and not skip_eval:
                print("- Evaluating on the test set...")""",
    ),
    (
        """            sps = global_step / (time.time() - start_time)
""",
        """            sps = global_step / (time.time() - start_time)
            if global_step + steps_per_iter >= stop_steps:
                print(f"- Stopping at {global_step + steps_per_iter} steps (W_STOP_STEPS)", flush=True)
                break
""",
    ),
]


class PatchError(Exception):
    """The checkout is not the one these patches were written for (or is patched already)."""


def replace_once(text: str, old: str, new: str, where: str, *, last: bool = False) -> str:
    """``text`` with ``old`` replaced by ``new``: ``old`` must occur once (or, with ``last``, at
    least once, the last occurrence replaced)."""
    count = text.count(old)
    if count == 0 or (count > 1 and not last):
        raise PatchError(f"{where}: expected the text once, found it {count} times:\n{old}")
    k = text.rindex(old)
    return text[:k] + new + text[k + len(old) :]


def patch_rl2_train(text: str) -> str:
    """``base.py`` with the patches applied inside ``RNNBasedMetaLearningAlgorithm.train``."""
    try:
        start = text.index("    def train(", text.index("class RNNBasedMetaLearningAlgorithm("))
        end = text.index("\nclass ", start)
    except ValueError as error:
        raise PatchError(f"{BASE}: no RNNBasedMetaLearningAlgorithm.train") from error
    method = text[start:end]
    for i, (old, new) in enumerate(RL2_LOOP):
        method = replace_once(method, old, new, f"{BASE} train", last=i == len(RL2_LOOP) - 1)
    return text[:start] + method + text[end:]


def patched(checkout: Path) -> dict[Path, str]:
    """The new text of each file to change; reads only, so a failure leaves the checkout as is."""
    run_py = (checkout / RUN).read_text()
    run_py = replace_once(run_py, CPU_OLD, CPU_NEW, RUN)
    run_py = replace_once(run_py, FINAL_EVAL_OLD, FINAL_EVAL_NEW, RUN)
    return {checkout / RUN: run_py, checkout / BASE: patch_rl2_train((checkout / BASE).read_text())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkout", type=Path, help="a metaworld-algorithms checkout at a2abf6a3bb1e"
    )
    args = parser.parse_args()
    if not (args.checkout / RUN).is_file():
        sys.exit(f"error: {args.checkout / RUN} not found; give the metaworld-algorithms checkout")
    try:
        changes = patched(args.checkout)
    except PatchError as error:
        sys.exit(f"error: {error}\n(use an unpatched checkout at a2abf6a3bb1e)")
    for path, text in changes.items():
        atomic_write_bytes(path, text.encode())
    print(f"patched {', '.join(str(p) for p in changes)}")


if __name__ == "__main__":
    main()
