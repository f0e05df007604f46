"""The lean Meta-World step gives Meta-World's numbers bit for bit (``metaworld_lean``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from metaworld.policies import ENV_POLICY_MAP
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from scipy.spatial.transform import Rotation

from metabench.tasks.metaworld import ML10Env, ML45Env
from metabench.tasks.metaworld_lean import LeanRotation, quat_from_matrix, touching_object

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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_class", "split"),
    [(ML10Env, "train"), (ML10Env, "test"), (ML45Env, "test")],
    ids=["ML10-train", "ML10-test", "ML45-test"],
)
def test_lean_envs_step_exactly_like_metaworld_on_every_class(
    env_class: type[ML10Env | ML45Env], split: str
) -> None:
    """Scripted grasps then random actions: observations, rewards and infos bit for bit, on
    every class of ML10 and ML45's test classes (20 of Meta-World's 50; ML45's training
    classes pass too but take minutes, so they are not in the suite).

    Meta-World's scripted policies reach for and grasp the objects, so the contact path of
    ``touching_object`` is exercised; it is also checked against the original at every step.
    """
    lean_env, original_env = env_class(split, lean=True), env_class(split, lean=False)
    rng = np.random.default_rng(1)
    touches: set[bool] = set()
    for task in lean_env.sample_tasks(len(lean_env.class_names), rng):
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
    assert touches == {False, True}, "the trajectories never touched an object: no contact check"
