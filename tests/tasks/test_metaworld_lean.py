"""The lean Meta-World step gives Meta-World's numbers bit for bit (``metaworld_lean``)."""

from __future__ import annotations

from typing import Any

import metaworld.env_dict
import numpy as np
import pytest
from metaworld.policies import ENV_POLICY_MAP
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from metaworld.types import Task as MetaWorldTask
from scipy.spatial.transform import Rotation

from metabench.tasks.metaworld.envs import MetaWorldTaskEnv
from metabench.tasks.metaworld.lean import LeanRotation, quat_from_matrix, touching_object

pytestmark = [
    pytest.mark.metaworld,
    pytest.mark.filterwarnings("ignore:.*Box observation space:UserWarning"),
    pytest.mark.filterwarnings("ignore:Constant.*may be too high:UserWarning"),
]


def scipy_quat(matrix: np.ndarray) -> np.ndarray:
    return np.asarray(Rotation.from_matrix(matrix).as_quat())


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), (actual, expected)


def test_quaternions_equal_scipys_bit_for_bit_on_every_branch() -> None:
    rng = np.random.default_rng(0)
    rotations = list(Rotation.random(2000, rng=rng).as_matrix())
    # each branch of SciPy's choice: the trace largest, or the x, y or z diagonal entry
    rotations += [Rotation.from_rotvec(axis * 3.1).as_matrix() for axis in np.eye(3)]
    rotations += [np.eye(3), np.diag([1.0, -1.0, -1.0])]
    # orthogonal to rounding (SciPy's fast path) and visibly not (SciPy orthogonalises)
    rotations += [m + rng.normal(scale=1e-15, size=(3, 3)) for m in rotations[:200]]
    rotations += [m + rng.normal(scale=1e-6, size=(3, 3)) for m in rotations[:200]]
    for matrix in rotations:
        assert_same_bits(quat_from_matrix(matrix), scipy_quat(matrix))


def test_matrices_scipy_rejects_raise_its_error() -> None:
    reflection = np.diag([1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="Non-positive determinant"):
        scipy_quat(reflection)
    with pytest.raises(ValueError, match="Non-positive determinant"):
        quat_from_matrix(reflection)
    with pytest.raises(ValueError, match="shape"):
        quat_from_matrix(np.eye(4))


def test_lean_rotation_forwards_everything_else_to_scipy() -> None:
    matrix = Rotation.from_euler("xyz", [0.1, 0.2, 0.3]).as_matrix()
    rotation = LeanRotation.from_matrix(matrix)
    assert_same_bits(rotation.as_quat(), scipy_quat(matrix))
    assert_same_bits(rotation.as_euler("xyz"), Rotation.from_matrix(matrix).as_euler("xyz"))
    assert_same_bits(
        rotation.as_quat(canonical=True, scalar_first=True),
        np.asarray(Rotation.from_matrix(matrix).as_quat(canonical=True, scalar_first=True)),
    )
    assert LeanRotation.from_euler is Rotation.from_euler


def assert_same_info(lean: dict[str, Any], original: dict[str, Any]) -> None:
    assert lean.keys() == original.keys()
    for key, value in original.items():
        assert np.asarray(lean[key]).tobytes() == np.asarray(value).tobytes(), key


# ML45's test classes, each through its ML1: the same Sawyer classes, without building ML45
# (Meta-World draws the goals of all 50 classes for it, most of a minute on 2 cores)
ML45_TEST = [("ML1", name, "test") for name in metaworld.env_dict.ML45_V3["test"]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "splits",
    [[("ML10", None, "train")], [("ML10", None, "test")], ML45_TEST],
    ids=["ML10-train", "ML10-test", "ML45-test"],
)
def test_lean_envs_step_exactly_like_metaworld_on_every_class(
    splits: list[tuple[str, str | None, str]],
) -> None:
    """Scripted grasps then random actions: observations, rewards and infos bit for bit, on
    every class of ML10 and ML45's test classes (20 of Meta-World's 50; ML45's training
    classes pass too but take minutes, so they are not in the suite).

    Meta-World's scripted policies reach for and grasp the objects, so the contact path of
    ``touching_object`` is exercised; it is also checked against the original at every step.
    """
    rng = np.random.default_rng(1)
    touches: set[bool] = set()
    for benchmark, env_name, split in splits:
        lean_env = MetaWorldTaskEnv(benchmark, env_name, split, lean=True)
        original_env = MetaWorldTaskEnv(benchmark, env_name, split, lean=False)
        for task in lean_env.sample_tasks(len(lean_env.class_names), rng):
            touches |= step_both(lean_env, original_env, task, rng)
    assert touches == {False, True}, "the trajectories never touched an object: no contact check"


def step_both(
    lean_env: MetaWorldTaskEnv,
    original_env: MetaWorldTaskEnv,
    task: MetaWorldTask,
    rng: np.random.Generator,
) -> set[bool]:
    """One episode of ``task`` in both envs, compared bit for bit at every step; return the
    values ``touching_object`` took."""
    touches: set[bool] = set()
    policy = ENV_POLICY_MAP[task.env_name]()
    obs, _ = lean_env.reset(seed=3, options={"task": task})
    expected, _ = original_env.reset(seed=3, options={"task": task})
    assert_same_bits(obs, expected)
    sawyer = lean_env.sawyer_env
    assert sawyer is not None
    for step in range(150):
        action = policy.get_action(obs) if step < 100 else rng.uniform(-1.0, 1.0, 4)
        action = np.clip(action, -1.0, 1.0).astype(np.float32)
        obs, reward, terminated, truncated, info = lean_env.step(action)
        expected, reward_expected, terminated_expected, truncated_expected, info_expected = (
            original_env.step(action)
        )
        assert_same_bits(obs, expected)
        assert (reward, terminated, truncated) == (
            reward_expected,
            terminated_expected,
            truncated_expected,
        )
        assert_same_info(info, info_expected)
        if "objGeom" in {sawyer.model.geom(i).name for i in range(sawyer.model.ngeom)}:
            object_id = sawyer.data.geom("objGeom").id
            touching = touching_object(sawyer, object_id)
            assert touching == SawyerXYZEnv.touching_object(sawyer, object_id)
            touches.add(touching)
    return touches
