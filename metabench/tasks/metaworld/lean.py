"""A leaner Meta-World step: the same numbers, bit for bit, with less Python per step.

On the ML10 classes more than half of a Sawyer env's step was Python around MuJoCo (measured
per call on 500-step rollouts, ``docs/speed.md``): ``touching_object`` builds a wrapper object
for every contact, twice (230-320 us where MuJoCo's own stepping takes 110-160 us), SciPy's
``Rotation.from_matrix`` spends some 110 us on input checks for one 3 x 3 matrix, and the
observation is assembled through ``np.split`` and nested ``np.hstack``. :func:`make_lean`
replaces those three on one env instance with versions that compute the same values in the
same floating-point order; the module and every other instance stay untouched.

Every replacement falls back to Meta-World's or SciPy's own code on input it does not handle
(a matrix that SciPy would orthogonalise or reject, objects whose positions and quaternions do
not pair up), so errors are the originals' too. ``tests/tasks/test_metaworld_lean.py`` checks
observations, rewards and infos against the unchanged envs along scripted and random
trajectories of every ML10 class, and the quaternions against SciPy.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from scipy.spatial.transform import Rotation

__all__ = ["LeanRotation", "make_lean", "quat_from_matrix"]

# numpy.isclose(gramian, eye, atol=1e-12) with its default rtol=1e-5: |g - I| <= atol + rtol*|I|
_EYE = np.eye(3)
_ORTHOGONAL_TOLERANCE = 1e-12 + 1e-05 * np.abs(_EYE)


def quat_from_matrix(matrix: np.ndarray) -> np.ndarray:
    """``Rotation.from_matrix(matrix).as_quat()`` for one 3 x 3 matrix, bit for bit, ~10x faster.

    SciPy (``_rotation_cy.from_matrix``) checks the determinant, then orthogonality through the
    gramian and ``np.isclose``; matrices that pass (MuJoCo's orientations always do) go to
    ``_from_matrix_orthogonal``, whose arithmetic is written out below in the same order. Any
    other matrix goes to SciPy, which orthogonalises or raises as it always has.
    """
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (3, 3):
        return np.asarray(Rotation.from_matrix(matrix).as_quat())
    stacked = matrix[np.newaxis]
    gramian = stacked @ np.transpose(stacked, (0, 2, 1))  # SciPy's product, so the same bits
    if not bool(np.all(np.abs(gramian[0] - _EYE) <= _ORTHOGONAL_TOLERANCE)):
        return np.asarray(Rotation.from_matrix(matrix).as_quat())
    m = matrix.tolist()
    # Rows are orthonormal to within 1e-5 here, so the determinant is +-1 and its sign is
    # robust to any evaluation order; SciPy raises for <= 0.
    det = (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )
    if not det > 0:
        return np.asarray(Rotation.from_matrix(matrix).as_quat())
    decision = [m[0][0], m[1][1], m[2][2], m[0][0] + m[1][1] + m[2][2]]
    choice = 0
    for index in (1, 2, 3):  # first maximum, as SciPy's _argmax4
        if decision[index] > decision[choice]:
            choice = index
    quat = [0.0, 0.0, 0.0, 0.0]
    if choice != 3:
        i = choice
        j = (i + 1) % 3
        k = (j + 1) % 3
        quat[i] = 1 - decision[3] + 2 * m[i][i]
        quat[j] = m[j][i] + m[i][j]
        quat[k] = m[k][i] + m[i][k]
        quat[3] = m[k][j] - m[j][k]
    else:
        quat[0] = m[2][1] - m[1][2]
        quat[1] = m[0][2] - m[2][0]
        quat[2] = m[1][0] - m[0][1]
        quat[3] = 1 + decision[3]
    norm = math.sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3])
    if norm != 0:  # SciPy leaves a zero quaternion as it is
        quat = [value / norm for value in quat]
    return np.array(quat)


class _MatrixRotation:
    """What ``LeanRotation.from_matrix`` returns: ``as_quat()`` fast, anything else from SciPy."""

    def __init__(self, matrix: Any) -> None:
        self._matrix = matrix

    def as_quat(self, canonical: bool = False, *, scalar_first: bool = False) -> np.ndarray:
        if canonical or scalar_first:
            return np.asarray(
                Rotation.from_matrix(self._matrix).as_quat(
                    canonical=canonical, scalar_first=scalar_first
                )
            )
        return quat_from_matrix(self._matrix)

    def __getattr__(self, name: str) -> Any:
        return getattr(Rotation.from_matrix(self._matrix), name)


class _ForwardToRotation(type):
    def __getattr__(cls, name: str) -> Any:
        return getattr(Rotation, name)


class LeanRotation(metaclass=_ForwardToRotation):
    """Stands in for SciPy's ``Rotation`` in Meta-World's ``_get_quat_objects`` methods.

    They all call ``Rotation.from_matrix(xmat).as_quat()``; that call is answered by
    :func:`quat_from_matrix`, every other attribute by SciPy's ``Rotation``.
    """

    @staticmethod
    def from_matrix(matrix: Any, *, assume_valid: bool = False) -> Any:
        if assume_valid:
            return Rotation.from_matrix(matrix, assume_valid=True)
        return _MatrixRotation(matrix)


def touching_object(self: SawyerXYZEnv, object_geom_id: int) -> bool:
    """``SawyerXYZEnv.touching_object`` over MuJoCo's contact arrays instead of per-contact objects.

    The same contacts are selected and their normal forces summed in the same order from the
    same start (Python's ``sum`` from 0), so the comparison sees the same two numbers.
    """
    contacts = self.data.contact
    geom1, geom2 = contacts.geom1, contacts.geom2
    touches_object = (geom1 == object_geom_id) | (geom2 == object_geom_id)
    forces = self.data.efc_force
    totals = []
    for pad in ("leftpad_geom", "rightpad_geom"):
        pad_id = self.data.geom(pad).id
        selected = touches_object & ((geom1 == pad_id) | (geom2 == pad_id))
        totals.append(sum(forces[contacts.efc_address[selected]].tolist()))
    return bool(totals[0] > 0 and totals[1] > 0)


def curr_obs_combined_no_goal(self: SawyerXYZEnv) -> np.ndarray:
    """``SawyerXYZEnv._get_curr_obs_combined_no_goal`` written into one preallocated array.

    Hand position, gripper opening (the same ``norm`` and ``clip`` calls), then each object's
    position and quaternion, zero-padded to ``_obs_obj_max_len``: copies of the same values
    without ``np.split`` and the nested ``np.hstack``.
    """
    pos_hand = self.get_endeff_pos()
    finger_right, finger_left = self.data.body("rightclaw"), self.data.body("leftclaw")
    gripper_distance_apart = np.linalg.norm(finger_right.xpos - finger_left.xpos)
    gripper_distance_apart = np.clip(gripper_distance_apart / 0.1, 0.0, 1.0)
    obj_pos = self._get_pos_objects()
    obj_quat = self._get_quat_objects()
    objects = len(obj_pos) // 3
    if len(obj_pos) % 3 or len(obj_quat) != 4 * objects or 7 * objects > self._obs_obj_max_len:
        # Meta-World's own code asserts or fails on these: let it.
        return SawyerXYZEnv._get_curr_obs_combined_no_goal(self)
    obs = np.zeros(4 + self._obs_obj_max_len)
    obs[:3] = pos_hand
    obs[3] = gripper_distance_apart
    per_object = obs[4 : 4 + 7 * objects].reshape(objects, 7)
    per_object[:, :3] = np.reshape(obj_pos, (objects, 3))
    per_object[:, 3:] = np.reshape(obj_quat, (objects, 4))
    return obs


@cache
def _lean_quat_objects(function: Callable[..., Any]) -> Callable[..., Any]:
    """A class's ``_get_quat_objects``, run with ``Rotation`` bound to :class:`LeanRotation`.

    A copy of the function with other globals, so Meta-World's module keeps SciPy's
    ``Rotation`` for everyone else.
    """
    if "Rotation" not in function.__code__.co_names:
        return function
    namespace = dict(function.__globals__)
    namespace["Rotation"] = LeanRotation
    lean = types.FunctionType(
        function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
    )
    lean.__qualname__ = function.__qualname__
    return lean


def make_lean(env: SawyerXYZEnv) -> SawyerXYZEnv:
    """Give ``env`` the lean ``touching_object``, observation and object quaternions; return it.

    Only this instance changes (its attributes shadow the class's methods). Classes that
    override ``touching_object`` or the observation keep their own; each class's
    ``_get_quat_objects`` runs its own code with :class:`LeanRotation`.
    """
    cls = type(env)
    if cls.touching_object is SawyerXYZEnv.touching_object:
        env.touching_object = types.MethodType(touching_object, env)  # type: ignore[method-assign]
    if cls._get_curr_obs_combined_no_goal is SawyerXYZEnv._get_curr_obs_combined_no_goal:
        env._get_curr_obs_combined_no_goal = types.MethodType(  # type: ignore[method-assign]
            curr_obs_combined_no_goal, env
        )
    lean_quat_objects = _lean_quat_objects(cls._get_quat_objects)
    env._get_quat_objects = types.MethodType(lean_quat_objects, env)  # type: ignore[method-assign]
    return env
