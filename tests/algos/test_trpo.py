"""TRPO building blocks against independent computations: dense solves, finite differences,
closed-form trust-region steps, and line searches whose answer is known in advance."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn.utils import parameters_to_vector

from metabench.algos.common.trpo import (
    backtracking_line_search,
    conjugate_gradient,
    flat_grad,
    flatten,
    gauss_newton_vector_product,
    hessian_vector_product,
    line_search_objectives,
    set_flat_params,
    trpo_step,
)

DTYPE = torch.float64


def random_spd(n: int, generator: torch.Generator, condition: float = 100.0) -> torch.Tensor:
    """A symmetric positive definite matrix with eigenvalues spread over ``[1, condition]``."""
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=DTYPE))
    eigenvalues = torch.logspace(0, math.log10(condition), n, dtype=DTYPE)
    return q @ torch.diag(eigenvalues) @ q.T


# -- flat vectors ------------------------------------------------------------------------------
def test_flatten_and_set_flat_params_round_trip_like_torch_helpers() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    params = list(net.parameters())
    torch.testing.assert_close(flatten(params), parameters_to_vector(params))
    new = torch.arange(float(sum(p.numel() for p in params)))
    set_flat_params(params, new)
    assert all(p is q for p, q in zip(params, net.parameters(), strict=True))  # same leaves
    torch.testing.assert_close(parameters_to_vector(net.parameters()), new)
    with pytest.raises(ValueError, match="elements"):
        set_flat_params(params, new[:-1])


# -- conjugate gradient --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 5, 20])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conjugate_gradient_solves_spd_systems(n: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    a = random_spd(n, generator)
    b = torch.randn(n, generator=generator, dtype=DTYPE)
    # CG is exact after n iterations in exact arithmetic; allow a few more for rounding.
    x = conjugate_gradient(lambda v: a @ v, b, iters=n + 5, residual_tol=1e-24)
    torch.testing.assert_close(x, torch.linalg.solve(a, b), rtol=1e-9, atol=1e-10)


def test_conjugate_gradient_stops_at_the_krylov_minimiser_after_iters_products() -> None:
    """After ``k`` iterations CG's iterate minimises ``0.5 x^T A x - b^T x`` over the Krylov
    space ``span{b, Ab, ..., A^(k-1) b}``: computed here by a dense projected solve."""
    generator = torch.Generator().manual_seed(3)
    a = random_spd(30, generator, condition=10.0)
    b = torch.randn(30, generator=generator, dtype=DTYPE)
    calls = []

    def hvp(v: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return a @ v

    iters = 5
    x = conjugate_gradient(hvp, b, iters=iters)
    assert len(calls) == iters
    krylov = [b]
    for _ in range(iters - 1):
        krylov.append(a @ krylov[-1])
    basis, _ = torch.linalg.qr(torch.stack([k / torch.linalg.norm(k) for k in krylov], dim=1))
    expected = basis @ torch.linalg.solve(basis.T @ a @ basis, basis.T @ b)
    torch.testing.assert_close(x, expected, rtol=1e-8, atol=1e-10)

    calls.clear()
    zero = conjugate_gradient(hvp, torch.zeros(30, dtype=DTYPE), iters=10)
    assert calls == []  # the residual of b = 0 is already below the tolerance
    assert torch.equal(zero, torch.zeros(30, dtype=DTYPE))
    with pytest.raises(ValueError, match="iters"):
        conjugate_gradient(hvp, b, iters=0)


# -- Hessian-vector products --------------------------------------------------------------------
def gaussian_kl_setup(seed: int) -> tuple[nn.Module, torch.Tensor, Normal]:
    """A small tanh net producing Gaussian means, inputs, and a fixed "old" distribution that
    differs from the net's (so the KL's gradient is not zero and the test is general)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).to(DTYPE)
    obs = torch.randn(16, 3, generator=generator, dtype=DTYPE)
    old = Normal(torch.randn(16, 2, generator=generator, dtype=DTYPE), torch.full((16, 2), 0.7))
    return net, obs, old


def test_hessian_vector_product_matches_finite_differences_of_the_kl_gradient() -> None:
    net, obs, old = gaussian_kl_setup(0)
    params = list(net.parameters())
    log_std = torch.zeros(2, dtype=DTYPE)

    def kl_fn() -> torch.Tensor:
        new = Normal(net(obs), log_std.exp())
        return kl_divergence(old, new).sum(-1).mean()

    damping = 0.03
    hvp = hessian_vector_product(kl_fn, params, damping)
    generator = torch.Generator().manual_seed(1)
    vectors = [torch.randn(sum(p.numel() for p in params), generator=generator, dtype=DTYPE)]
    vectors += [torch.randn_like(vectors[0]) for _ in range(2)]
    # All products first: the closure keeps the graph at these parameter values, and the
    # finite differences below move the parameters in place.
    products = [hvp(v) for v in vectors]
    theta = flatten([p.detach() for p in params]).clone()
    eps = 1e-5

    def grad_at(point: torch.Tensor) -> torch.Tensor:
        set_flat_params(params, point)
        return flat_grad(kl_fn(), params)

    for v, product in zip(vectors, products, strict=True):
        finite_difference = (grad_at(theta + eps * v) - grad_at(theta - eps * v)) / (2 * eps)
        torch.testing.assert_close(product, finite_difference + damping * v, rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_of_a_quadratic_is_exact() -> None:
    generator = torch.Generator().manual_seed(4)
    a = random_spd(6, generator)
    x = torch.randn(6, generator=generator, dtype=DTYPE, requires_grad=True)
    hvp = hessian_vector_product(lambda: 0.5 * x @ a @ x, [x], damping=0.0)
    v = torch.randn(6, generator=generator, dtype=DTYPE)
    torch.testing.assert_close(hvp(v), a @ v)
    torch.testing.assert_close(hvp(2 * v), 2 * a @ v)  # reusable: the graph is retained


def test_hessian_vector_product_differentiates_through_an_inner_gradient_step() -> None:
    """The MAML case: the KL is taken at ``theta' = theta - lr * grad L(theta)`` built with
    ``create_graph=True``, so ``H`` includes third derivatives of the network."""
    net, obs, old = gaussian_kl_setup(5)
    params = list(net.parameters())
    targets = torch.randn(16, 2, generator=torch.Generator().manual_seed(6), dtype=DTYPE)
    names = [name for name, _ in net.named_parameters()]

    def kl_after_inner_step(create_graph: bool = True) -> torch.Tensor:
        inner = ((net(obs) - targets) ** 2).mean()
        grads = torch.autograd.grad(inner, params, create_graph=create_graph)
        adapted = {n: p - 0.3 * g for n, p, g in zip(names, params, grads, strict=True)}
        mean = torch.func.functional_call(net, adapted, (obs,))
        return kl_divergence(old, Normal(mean, torch.ones_like(mean))).sum(-1).mean()

    hvp = hessian_vector_product(kl_after_inner_step, params, damping=0.0)
    theta = flatten([p.detach() for p in params]).clone()
    v = torch.randn(theta.numel(), generator=torch.Generator().manual_seed(7), dtype=DTYPE)
    eps = 1e-5

    def grad_at(point: torch.Tensor) -> torch.Tensor:
        set_flat_params(params, point)
        return flat_grad(kl_after_inner_step(), params)

    finite_difference = (grad_at(theta + eps * v) - grad_at(theta - eps * v)) / (2 * eps)
    set_flat_params(params, theta)
    torch.testing.assert_close(hvp(v), finite_difference, rtol=1e-6, atol=1e-8)


def outputs_after_inner_step(
    net: nn.Module, log_std: torch.Tensor, obs: torch.Tensor, targets: torch.Tensor
) -> list[torch.Tensor]:
    """Means and log-stds after one inner gradient step on ``net`` and ``log_std``, built with
    ``create_graph=True`` (the MAML case)."""
    params = [*net.parameters(), log_std]
    inner = ((net(obs) - targets) ** 2).mean() + ((log_std - 0.5) ** 2).sum()
    grads = torch.autograd.grad(inner, params, create_graph=True)
    names = [name for name, _ in net.named_parameters()]
    adapted = {n: p - 0.3 * g for n, p, g in zip(names, params, grads, strict=False)}
    mean = torch.func.functional_call(net, adapted, (obs,))
    return [mean, (log_std - 0.3 * grads[-1]).expand_as(mean)]


def kl_from(old: Sequence[torch.Tensor]) -> Callable[[Sequence[torch.Tensor]], torch.Tensor]:
    """The mean Gaussian ``KL(old || new)`` as a function of the new means and log-stds."""
    old_mean, old_log_std = (tensor.detach() for tensor in old)

    def kl_of(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
        mean, log_std = outputs
        new = Normal(mean, log_std.exp())
        return kl_divergence(Normal(old_mean, old_log_std.exp()), new).sum(-1).mean()

    return kl_of


def inner_step_setup(seed: int) -> tuple[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    net, obs, _ = gaussian_kl_setup(seed)
    log_std = torch.tensor([-0.3, 0.2], dtype=DTYPE, requires_grad=True)
    targets = torch.randn(16, 2, generator=torch.Generator().manual_seed(seed + 1), dtype=DTYPE)
    return net, log_std, obs, targets


def test_gauss_newton_product_is_the_kl_hessian_where_new_equals_old() -> None:
    """At the start of a TRPO step (new = old, through an inner step) the product is the KL's
    Hessian: against central finite differences of the KL's gradient."""
    net, log_std, obs, targets = inner_step_setup(8)
    params = [*net.parameters(), log_std]
    outputs = outputs_after_inner_step(net, log_std, obs, targets)
    kl_of = kl_from(outputs)
    damping = 0.02
    product = gauss_newton_vector_product(outputs, kl_of, params, damping)
    theta = flatten([p.detach() for p in params]).clone()
    v = torch.randn(theta.numel(), generator=torch.Generator().manual_seed(10), dtype=DTYPE)
    products = [product(v), product(3 * v)]  # reusable: the graphs are retained
    eps = 1e-5

    def grad_at(point: torch.Tensor) -> torch.Tensor:
        set_flat_params(params, point)
        return flat_grad(kl_of(outputs_after_inner_step(net, log_std, obs, targets)), params)

    finite_difference = (grad_at(theta + eps * v) - grad_at(theta - eps * v)) / (2 * eps)
    torch.testing.assert_close(products[0], finite_difference + damping * v, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(products[1], 3 * products[0], rtol=1e-12, atol=1e-12)


def test_gauss_newton_product_is_j_transpose_k_j_away_from_the_old_policy() -> None:
    """Where new and old differ, the product is ``J^T K J`` (dense Jacobian and output-space
    Hessian), not the KL's Hessian, which adds the outputs' own curvature."""
    net, log_std, obs, targets = inner_step_setup(11)
    params = [*net.parameters(), log_std]
    outputs = outputs_after_inner_step(net, log_std, obs, targets)
    shifted = [outputs[0].detach() + 0.4, outputs[1].detach() - 0.2]
    kl_of = kl_from(shifted)
    flat_outputs = torch.cat([y.reshape(-1) for y in outputs])
    # dense J, one row per output, from first-order gradients only
    jacobian = torch.stack(
        [flat_grad(flat_outputs[i], params, retain_graph=True) for i in range(len(flat_outputs))]
    )
    half = outputs[0].numel()

    def kl_of_flat(flat: torch.Tensor) -> torch.Tensor:
        return kl_of([flat[:half].view_as(outputs[0]), flat[half:].view_as(outputs[1])])

    k = torch.autograd.functional.hessian(kl_of_flat, flat_outputs.detach())
    v = torch.randn(jacobian.shape[1], generator=torch.Generator().manual_seed(12), dtype=DTYPE)
    expected = jacobian.T @ k @ jacobian @ v
    gauss_newton = gauss_newton_vector_product(outputs, kl_of, params, damping=0.0)(v)
    torch.testing.assert_close(gauss_newton, expected, rtol=1e-9, atol=1e-12)
    full = hessian_vector_product(lambda: kl_of(outputs), params, damping=0.0)(v)
    assert (full - gauss_newton).norm() > 1e-3 * full.norm()


def test_gauss_newton_product_of_outputs_that_ignore_the_parameters_is_the_damping() -> None:
    x = torch.ones(3, dtype=DTYPE, requires_grad=True)
    constant = torch.zeros(4, 2, dtype=DTYPE)
    product = gauss_newton_vector_product(
        [constant, constant.clone()], kl_from([constant, constant]), [x], damping=0.5
    )
    v = torch.arange(3, dtype=DTYPE)
    assert torch.equal(product(v), 0.5 * v)
    with pytest.raises(ValueError, match="damping"):
        gauss_newton_vector_product([constant], kl_from([constant, constant]), [x], -1.0)


# -- line search ---------------------------------------------------------------------------------
class Recorder:
    """Closures for a line search over ``x``: loss ``-sum(x)``, KL ``||x - x0||^2``, recording
    the KL of every evaluated point."""

    def __init__(self, x: torch.Tensor, loss_sign: float = 1.0) -> None:
        self.x = x
        self.x0 = x.detach().clone()
        self.loss_sign = loss_sign
        self.kls: list[float] = []

    def loss(self) -> torch.Tensor:
        return -self.loss_sign * self.x.sum()

    def kl(self) -> torch.Tensor:
        value = ((self.x - self.x0) ** 2).sum()
        self.kls.append(float(value.detach()))
        return value


def test_line_search_never_accepts_a_step_that_violates_the_kl_bound() -> None:
    x = torch.zeros(4, dtype=DTYPE, requires_grad=True)
    rec = Recorder(x)
    full_step = torch.full((4,), 0.5, dtype=DTYPE)  # ||step||^2 = 1: KL 1 at the full step
    max_kl = 0.01
    result = backtracking_line_search(
        [x], full_step, rec.loss, rec.kl, max_kl, loss_before=0.0, ratio=0.8, max_steps=15
    )
    # the first fraction with fraction**2 <= 0.01 is 0.8**11 (0.8**10 = 0.107 > 0.1)
    assert result.accepted
    assert result.n_backtracks == 11
    assert result.step_fraction == pytest.approx(0.8**11)
    assert all(kl > max_kl for kl in rec.kls[:-1])
    assert rec.kls[-1] <= max_kl
    assert result.kl == pytest.approx(rec.kls[-1])
    torch.testing.assert_close(x.detach(), 0.8**11 * full_step)


def test_line_search_restores_parameters_when_every_step_violates_the_bound() -> None:
    x = torch.tensor([0.3, -1.0], dtype=DTYPE, requires_grad=True)
    start = x.detach().clone()
    rec = Recorder(x)
    full_step = torch.tensor([100.0, 100.0], dtype=DTYPE)  # 0.8**14 * 141 is still far outside
    result = backtracking_line_search(
        [x], full_step, rec.loss, rec.kl, 0.01, loss_before=float(rec.loss().detach())
    )
    assert not result.accepted
    assert result.step_fraction == 0.0
    assert len(rec.kls) == 15
    assert all(kl > 0.01 for kl in rec.kls)
    assert torch.equal(x.detach(), start)


def test_line_search_requires_the_loss_to_improve() -> None:
    x = torch.zeros(3, dtype=DTYPE, requires_grad=True)
    rec = Recorder(x, loss_sign=-1.0)  # loss = +sum(x): the step makes it worse
    result = backtracking_line_search(
        [x], torch.full((3,), 1e-3, dtype=DTYPE), rec.loss, rec.kl, 0.01, loss_before=0.0
    )
    assert not result.accepted
    assert torch.equal(x.detach(), torch.zeros(3, dtype=DTYPE))


def test_line_search_rejects_nan_losses() -> None:
    x = torch.zeros(2, dtype=DTYPE, requires_grad=True)
    result = backtracking_line_search(
        [x],
        torch.full((2,), 1e-3, dtype=DTYPE),
        lambda: torch.tensor(math.nan),
        lambda: torch.tensor(0.0),
        0.01,
        loss_before=0.0,
    )
    assert not result.accepted
    assert torch.equal(x.detach(), torch.zeros(2, dtype=DTYPE))


# -- the whole step ------------------------------------------------------------------------------
def quadratic_problem(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x0``, a linear loss's gradient ``g``, and a KL Hessian ``A`` (KL exactly quadratic)."""
    generator = torch.Generator().manual_seed(seed)
    a = random_spd(5, generator, condition=10.0)
    g = torch.randn(5, generator=generator, dtype=DTYPE)
    x0 = torch.randn(5, generator=generator, dtype=DTYPE)
    return x0, g, a, torch.linalg.solve(a, g)


@pytest.mark.parametrize("seed", [0, 1])
def test_trpo_step_takes_the_closed_form_trust_region_step(seed: int) -> None:
    x0, g, a, a_inv_g = quadratic_problem(seed)
    x = x0.clone().requires_grad_()
    max_kl = 0.01

    def loss_fn() -> torch.Tensor:
        return g @ (x - x0)

    def kl_fn() -> torch.Tensor:
        d = x - x0
        return 0.5 * d @ a @ d

    record = trpo_step(
        [x], g, lambda v: a @ v, loss_fn, kl_fn, max_kl=max_kl, cg_iters=20, ls_steps=15
    )
    assert record.accepted and record.reason == "accepted"
    # TRPO appendix C: s = -sqrt(2 delta / g^T A^-1 g) A^-1 g; the quadratic KL is then exactly
    # delta at the full step, so rounding decides between fraction 1 and 0.8.
    full_step = -math.sqrt(2 * max_kl / float(g @ a_inv_g)) * a_inv_g
    assert record.step_fraction in (pytest.approx(1.0), pytest.approx(0.8))
    torch.testing.assert_close(x.detach(), x0 + record.step_fraction * full_step)
    assert record.kl <= max_kl
    assert record.kl == pytest.approx(max_kl * record.step_fraction**2, rel=1e-9)
    assert record.loss_after < record.loss_before == 0.0


def test_trpo_step_with_nan_gradient_leaves_parameters_unchanged() -> None:
    x0, g, a, _ = quadratic_problem(2)
    x = x0.clone().requires_grad_()
    called = []

    def kl_fn() -> torch.Tensor:
        called.append("kl")
        return torch.tensor(0.0)

    bad = g.clone()
    bad[2] = math.nan
    record = trpo_step([x], bad, lambda v: a @ v, lambda: g @ (x - x0), kl_fn)
    assert not record.accepted
    assert record.reason == "nonfinite_gradient"
    assert record.step_fraction == 0.0
    assert math.isnan(record.gradient_norm)
    assert called == []  # rejected before any step was tried
    assert torch.equal(x.detach(), x0)


def test_trpo_step_rejects_nan_curvature_and_zero_gradient() -> None:
    x0, g, a, _ = quadratic_problem(3)
    x = x0.clone().requires_grad_()

    def loss_fn() -> torch.Tensor:
        return g @ (x - x0)

    def kl_fn() -> torch.Tensor:
        return torch.tensor(0.0)

    def nan_hvp(v: torch.Tensor) -> torch.Tensor:
        return torch.full_like(v, math.nan)

    record = trpo_step([x], g, nan_hvp, loss_fn, kl_fn)
    assert (record.accepted, record.reason) == (False, "nonpositive_curvature")
    assert torch.equal(x.detach(), x0)
    record = trpo_step([x], torch.zeros(5, dtype=DTYPE), lambda v: a @ v, loss_fn, kl_fn)
    assert (record.accepted, record.reason) == (False, "zero_gradient")
    assert torch.equal(x.detach(), x0)


def test_trpo_step_reports_a_failed_line_search() -> None:
    x0, g, a, _ = quadratic_problem(4)
    x = x0.clone().requires_grad_()
    # The KL model (A) underestimates the true KL by 1e6: no fraction fits the trust region.
    record = trpo_step(
        [x],
        g,
        lambda v: a @ v,
        lambda: g @ (x - x0),
        lambda: 1e6 * (x - x0) @ a @ (x - x0),
        max_kl=0.01,
    )
    assert (record.accepted, record.reason) == (False, "line_search_failed")
    assert record.n_backtracks == 15
    assert record.kl > 0.01
    assert torch.equal(x.detach(), x0)


def test_line_search_objectives_evaluate_each_point_once():
    param = torch.tensor([1.0, 2.0])
    calls = []

    def loss_and_kl():
        calls.append(param.clone())
        return param.sum(), (param**2).sum()

    loss_fn, kl_fn = line_search_objectives([param], loss_and_kl)
    assert (loss_fn().item(), kl_fn().item()) == (3.0, 5.0) and len(calls) == 1
    param.mul_(2.0)  # a new point: evaluated again, once
    assert (kl_fn().item(), loss_fn().item()) == (20.0, 6.0) and len(calls) == 2
