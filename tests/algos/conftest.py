"""Shared fixtures of the algorithm tests."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """Tiny tensors gain nothing from intra-op threads, which on a busy 2-core machine made these
    modules several times slower; bitwise-equal runs also need one fixed thread count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
