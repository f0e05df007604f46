"""Trust-region policy optimisation, the parts that do not depend on what is optimised.

TRPO (Schulman et al. 2015, "Trust Region Policy Optimization", appendix C) takes the step that
minimises a linearised loss subject to ``mean KL(old || new) <= max_kl``, with the KL approximated
by its second-order Taylor expansion ``0.5 * s^T H s``:

1. solve ``H x = g`` for the loss gradient ``g`` by conjugate gradient (:func:`conjugate_gradient`),
   touching ``H`` only through exact Hessian-vector products (:func:`hessian_vector_product`, or
   :func:`gauss_newton_vector_product` where the policy's outputs are at hand);
2. scale ``x`` so the quadratic KL model equals ``max_kl``;
3. backtrack along that step until the *true* KL holds and the loss improved
   (:func:`backtracking_line_search`).

:func:`trpo_step` chains the three. Everything works on a list of parameter tensors flattened
into one vector, so MAML can hand it the meta-parameters and closures that adapt through them:
the closures are called as they are (not under ``torch.no_grad``), because evaluating a MAML
loss needs autograd for the inner gradient step. Defaults follow pytorch-maml-rl
(``maml_rl/metalearners/maml_trpo.py``): 10 CG iterations, damping 1e-5, 15 backtracking
steps with ratio 0.8.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import torch

__all__ = [
    "HessianVectorProduct",
    "LineSearchResult",
    "TRPOStep",
    "backtracking_line_search",
    "conjugate_gradient",
    "flat_grad",
    "flatten",
    "gauss_newton_vector_product",
    "hessian_vector_product",
    "line_search_objectives",
    "set_flat_params",
    "trpo_step",
]

HessianVectorProduct = Callable[[torch.Tensor], torch.Tensor]
"""Maps a flat vector ``v`` to ``H v`` (flat, same size)."""


# -- flat parameter vectors ------------------------------------------------------------------------
def flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Concatenate ``tensors`` into one flat vector (keeps the autograd graph, unlike
    ``parameters_to_vector`` on ``.data``), so a flat gradient can itself be differentiated."""
    return torch.cat([tensor.reshape(-1) for tensor in tensors])


def set_flat_params(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy ``flat`` into ``params`` in place, in order (``vector_to_parameters`` semantics).

    In place and without autograd: the tensors stay the same leaf objects, so modules and
    optimisers holding them see the new values.

    :raises ValueError: if ``flat`` has a different number of elements than ``params``.
    """
    total = sum(param.numel() for param in params)
    if flat.numel() != total:
        raise ValueError(f"flat vector has {flat.numel()} elements, the parameters have {total}")
    offset = 0
    with torch.no_grad():
        for param in params:
            n = param.numel()
            param.copy_(flat[offset : offset + n].view_as(param))
            offset += n


def flat_grad(
    output: torch.Tensor,
    params: Sequence[torch.Tensor],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> torch.Tensor:
    """Gradient of the scalar ``output`` w.r.t. ``params`` as one flat vector.

    Parameters ``output`` does not depend on get zeros (``allow_unused``), so a policy part that
    a loss ignores does not crash the optimiser.
    """
    grads = torch.autograd.grad(
        output,
        list(params),
        create_graph=create_graph,
        retain_graph=retain_graph,
        allow_unused=True,
    )
    return flatten(
        [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)]
    )


# -- the three building blocks ---------------------------------------------------------------------
def conjugate_gradient(
    hvp: HessianVectorProduct,
    b: torch.Tensor,
    iters: int = 10,
    residual_tol: float = 1e-10,
) -> torch.Tensor:
    """Approximately solve ``H x = b`` for symmetric positive definite ``H`` given only ``v -> Hv``.

    TRPO never forms ``H`` (it has ``n_params**2`` entries); CG needs one product per iteration
    and converges in at most ``n`` iterations for an ``n``-dim system, and usually far fewer
    steps give a good enough direction (10, as in the TRPO paper's experiments).

    :param hvp: ``v -> H v``.
    :param b: right-hand side, a flat vector.
    :param iters: maximum number of iterations (each costs one ``hvp``).
    :param residual_tol: stop once the squared residual norm ``||b - Hx||^2`` falls below this.
    :return: ``x``, detached from any graph.
    """
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    b = b.detach()
    x = torch.zeros_like(b)
    r = b.clone()  # residual b - Hx, with x = 0
    p = r.clone()  # search direction
    r_dot_r = torch.dot(r, r)
    for _ in range(iters):
        if r_dot_r.item() < residual_tol:
            break
        hp = hvp(p).detach()
        alpha = r_dot_r / torch.dot(p, hp)
        x = x + alpha * p
        r = r - alpha * hp
        new_r_dot_r = torch.dot(r, r)
        p = r + (new_r_dot_r / r_dot_r) * p
        r_dot_r = new_r_dot_r
    return x


def hessian_vector_product(
    kl_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    damping: float,
) -> HessianVectorProduct:
    """Exact ``v -> (H + damping I) v`` for the Hessian ``H`` of ``kl_fn()`` w.r.t. ``params``.

    Double backpropagation (Pearlmutter 1994): ``H v = grad(grad(kl) . v)``. The KL and its
    gradient are built once, with ``create_graph=True``, and reused for every product (CG calls
    it ``iters`` times). If ``kl_fn`` reaches ``params`` through a MAML inner step built with
    ``create_graph=True``, the products differentiate through that step as well: this is the
    Fisher of the *post-adaptation* policy w.r.t. the meta-parameters (pytorch-maml-rl's
    ``hessian_vector_product``). ``damping`` keeps ``H`` positive definite where the KL is flat.

    The returned function is valid while ``params`` keep their values: it holds the graph built
    at the first call, and autograd refuses that graph once a parameter was changed in place
    (as :func:`trpo_step` does only after its last product).

    :param kl_fn: returns the mean KL between the fixed old and the current policy; its value at
        the current parameters is 0, its Hessian is the Fisher information matrix.
    :param params: the tensors to differentiate against.
    :param damping: Tikhonov damping added to the diagonal (pytorch-maml-rl: 1e-5; garage 1e-5 to
        0.1 as a "reg_coeff").
    """
    if damping < 0:
        raise ValueError(f"damping must be >= 0, got {damping}")
    params = list(params)
    kl_grad: torch.Tensor | None = None

    def product(vector: torch.Tensor) -> torch.Tensor:
        nonlocal kl_grad
        if kl_grad is None:  # built lazily, then kept for the following calls
            kl_grad = flat_grad(kl_fn(), params, create_graph=True)
        grad_dot_v = torch.dot(kl_grad, vector.detach())
        if not grad_dot_v.requires_grad:  # the KL does not depend on params at all
            return damping * vector.detach()
        hv = flat_grad(grad_dot_v, params, retain_graph=True)
        return hv + damping * vector.detach()

    return product


def gauss_newton_vector_product(
    outputs: Sequence[torch.Tensor],
    kl_of_outputs: Callable[[Sequence[torch.Tensor]], torch.Tensor],
    params: Sequence[torch.Tensor],
    damping: float,
) -> HessianVectorProduct:
    """``v -> (J^T K J + damping I) v``: the KL's Hessian where the new policy is the old one.

    ``J`` is the Jacobian of the policy's ``outputs`` (built from ``params``, through a MAML
    inner step if there is one) and ``K`` the Hessian of ``kl_of_outputs`` in output space. The
    KL's full Hessian w.r.t. ``params`` adds ``sum_y dKL/dy * d2y/dparams2``, and ``dKL/dy`` is
    exactly 0 where new equals old, as at the start of every TRPO step. Double backpropagation
    through ``grad(KL)`` (:func:`hessian_vector_product`) still computes that term, the costly
    one (through a MAML inner step, third-order), and multiplies it by those zeros; this product
    leaves it out: ``J v`` by differentiating ``J^T w`` in ``w``, then ``K (J v)`` on the
    outputs alone, then ``J^T`` of that. On MAML-TRPO's ML10 shapes that is 2/3 of the
    matrix-product FLOPs of each product, with the same floats (``scripts/bench_maml_step.py``;
    ``tests/algos/test_trpo.py``).

    :param outputs: the policy's outputs whose KL the step constrains (e.g. each task's means and
        log-stds), as functions of ``params``, at the point where they equal the old ones.
    :param kl_of_outputs: the mean KL from the old policy, given tensors shaped as ``outputs``.
    :param params: the tensors to differentiate against.
    :param damping: Tikhonov damping added to the diagonal, as in :func:`hessian_vector_product`.
    """
    if damping < 0:
        raise ValueError(f"damping must be >= 0, got {damping}")
    params, outputs = list(params), list(outputs)

    # J^T w with its graph in w (at w = 0: only its derivative in w is used), and the KL's
    # gradient in output space with its graph; built at the first call, kept for the others
    @functools.cache
    def build() -> tuple[list[torch.Tensor], ...]:
        probes = [torch.zeros_like(y, requires_grad=True) for y in outputs]
        transposed = _grads(outputs, params, probes, create_graph=True)
        leaves = [y.detach().requires_grad_() for y in outputs]
        kl_grad = list(torch.autograd.grad(kl_of_outputs(leaves), leaves, create_graph=True))
        return probes, transposed, leaves, kl_grad

    def product(vector: torch.Tensor) -> torch.Tensor:
        probes, transposed, leaves, kl_grad = build()
        if not any(t.requires_grad for t in transposed):  # the outputs ignore params
            return damping * vector.detach()
        pieces = torch.split(vector.detach(), [p.numel() for p in params])
        jv = _grads(transposed, probes, [v.view_as(p) for v, p in zip(pieces, params, strict=True)])
        kjv = _grads(kl_grad, leaves, jv)
        return flatten(_grads(outputs, params, kjv)) + damping * vector.detach()

    return product


def _grads(
    outputs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor],
    create_graph: bool = False,
) -> list[torch.Tensor]:
    """The vector-Jacobian product of ``outputs`` w.r.t. ``inputs`` (zeros where an input is
    not reached), keeping the graph for the next call."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs, strict=True) if o.requires_grad]
    if not pairs:
        return [torch.zeros_like(x) for x in inputs]
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        list(inputs),
        grad_outputs=[g for _, g in pairs],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs, strict=True)]


@dataclasses.dataclass(frozen=True)
class LineSearchResult:
    """What the line search found.

    :param accepted: whether some step fraction satisfied both conditions.
    :param step_fraction: the accepted fraction of the full step (0.0 if none).
    :param n_backtracks: fractions tried and rejected before the accepted one (all, if none).
    :param loss: the loss at the parameters left in place.
    :param kl: the KL at the accepted step (at the last tried step if none was accepted).
    """

    accepted: bool
    step_fraction: float
    n_backtracks: int
    loss: float
    kl: float


def backtracking_line_search(
    params: Sequence[torch.Tensor],
    full_step: torch.Tensor,
    loss_fn: Callable[[], torch.Tensor],
    kl_fn: Callable[[], torch.Tensor],
    max_kl: float,
    loss_before: float,
    ratio: float = 0.8,
    max_steps: int = 15,
) -> LineSearchResult:
    """Try ``params + ratio**i * full_step`` for ``i = 0, 1, ...`` until one is acceptable.

    A fraction is accepted only if the mean KL is at most ``max_kl`` *and* the loss is lower than
    ``loss_before``, the rule of pytorch-maml-rl's ``MAMLTRPO.step``. The quadratic KL model that
    sized the full step can be badly wrong (it is a Taylor expansion around the old policy), so
    the true KL is always checked. A NaN loss or KL counts as a failure. If no fraction passes,
    the parameters are restored exactly.

    :param params: tensors updated in place.
    :param full_step: flat step added to the flat parameters at fraction 1.
    :param loss_fn: the loss at the current parameter values (to be minimised).
    :param kl_fn: the mean KL between the old policy and the current parameters.
    :param max_kl: the trust region's radius.
    :param loss_before: the loss at the starting parameters.
    :param ratio: shrink factor per backtrack, in ``(0, 1)``.
    :param max_steps: fractions to try: ``1, ratio, ..., ratio**(max_steps - 1)``.
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must be in (0, 1), got {ratio}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    params = list(params)
    old = flatten([param.detach() for param in params]).clone()
    kl = math.nan
    for i in range(max_steps):
        fraction = ratio**i
        set_flat_params(params, old + fraction * full_step.detach())
        loss = float(loss_fn().item())
        kl = float(kl_fn().item())
        if math.isfinite(loss) and math.isfinite(kl) and kl <= max_kl and loss < loss_before:
            return LineSearchResult(True, fraction, i, loss, kl)
    set_flat_params(params, old)
    return LineSearchResult(False, 0.0, max_steps, loss_before, kl)


# -- one TRPO update -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TRPOStep:
    """The record of one :func:`trpo_step`, for the caller to log.

    :param accepted: whether the parameters changed.
    :param reason: ``"accepted"``, ``"nonfinite_gradient"``, ``"zero_gradient"``,
        ``"nonpositive_curvature"`` (``x^T H x <= 0`` or NaN: CG gave no usable direction) or
        ``"line_search_failed"``.
    :param loss_before: the loss at the starting parameters.
    :param loss_after: the loss at the parameters left in place.
    :param kl: the mean KL at the accepted step (NaN if no step was evaluated).
    :param step_fraction: the accepted fraction of the full step, 0.0 if rejected.
    :param n_backtracks: rejected fractions before the accepted one.
    :param gradient_norm: the norm of the loss gradient (NaN/inf if it was not finite).
    """

    accepted: bool
    reason: str
    loss_before: float
    loss_after: float
    kl: float
    step_fraction: float
    n_backtracks: int
    gradient_norm: float


def line_search_objectives(
    params: Sequence[torch.Tensor],
    loss_and_kl: Callable[[], tuple[torch.Tensor, torch.Tensor]],
) -> tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]:
    """``(loss_fn, kl_fn)`` for :func:`trpo_step` from one function computing both at the
    current ``params``: the line search asks for the loss and then the KL at each point, and the
    two share most of their work (a forward pass, MAML's re-adaptation), so each point is
    evaluated once."""
    cache: dict[str, torch.Tensor] = {}

    def evaluate() -> tuple[torch.Tensor, torch.Tensor]:
        at = flatten([param.detach() for param in params])
        if "at" not in cache or not torch.equal(cache["at"], at):
            cache["loss"], cache["kl"] = loss_and_kl()
            cache["at"] = at.clone()
        return cache["loss"], cache["kl"]

    return (lambda: evaluate()[0]), (lambda: evaluate()[1])


def trpo_step(
    params: Sequence[torch.Tensor],
    gradient: torch.Tensor,
    hvp: HessianVectorProduct,
    loss_fn: Callable[[], torch.Tensor],
    kl_fn: Callable[[], torch.Tensor],
    *,
    max_kl: float = 0.01,
    cg_iters: int = 10,
    cg_residual_tol: float = 1e-10,
    ls_steps: int = 15,
    ls_ratio: float = 0.8,
    loss_before: float | None = None,
) -> TRPOStep:
    """One TRPO update of ``params`` in place; a rejected update leaves them untouched.

    With ``x = H^{-1} g`` from CG, the step ``-sqrt(2 max_kl / x^T H x) x`` puts the quadratic
    KL model exactly on the trust-region boundary (TRPO paper, appendix C); the line search then
    shrinks it until the real constraint and an improvement hold.

    :param params: tensors updated in place (e.g. ``list(policy.parameters())``).
    :param gradient: flat gradient of the loss w.r.t. ``params``.
    :param hvp: ``v -> H v`` for the KL Hessian (see :func:`hessian_vector_product`).
    :param loss_fn: loss at the current parameter values (minimised).
    :param kl_fn: mean KL between the old policy and the current parameters.
    :param max_kl: trust-region radius (0.01 in garage's and the Meta-World paper's MAML-TRPO).
    :param cg_iters: conjugate-gradient iterations.
    :param cg_residual_tol: conjugate-gradient stopping tolerance.
    :param ls_steps: line-search fractions to try.
    :param ls_ratio: line-search shrink factor.
    :param loss_before: the loss at the current parameters, if the caller already has it.
    """
    if not max_kl > 0:
        raise ValueError(f"max_kl must be positive, got {max_kl}")
    params = list(params)
    gradient = gradient.detach()
    gradient_norm = float(torch.linalg.vector_norm(gradient).item())
    if loss_before is None:
        loss_before = float(loss_fn().item())

    def rejected(reason: str, kl: float = math.nan, n_backtracks: int = 0) -> TRPOStep:
        return TRPOStep(
            False, reason, loss_before, loss_before, kl, 0.0, n_backtracks, gradient_norm
        )

    if not math.isfinite(gradient_norm) or not math.isfinite(loss_before):
        return rejected("nonfinite_gradient")
    if gradient_norm == 0.0:
        return rejected("zero_gradient")
    direction = conjugate_gradient(hvp, gradient, iters=cg_iters, residual_tol=cg_residual_tol)
    curvature = float(torch.dot(direction, hvp(direction).detach()).item())  # x^T H x
    if not (math.isfinite(curvature) and curvature > 0.0):
        return rejected("nonpositive_curvature")
    full_step = -math.sqrt(2.0 * max_kl / curvature) * direction
    if not torch.isfinite(full_step).all():
        return rejected("nonpositive_curvature")
    search = backtracking_line_search(
        params, full_step, loss_fn, kl_fn, max_kl, loss_before, ratio=ls_ratio, max_steps=ls_steps
    )
    if not search.accepted:
        return rejected("line_search_failed", search.kl, search.n_backtracks)
    return TRPOStep(
        True,
        "accepted",
        loss_before,
        search.loss,
        search.kl,
        search.step_fraction,
        search.n_backtracks,
        gradient_norm,
    )
