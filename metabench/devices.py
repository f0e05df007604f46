"""Where an algorithm's tensors live: ``--device auto|cpu|cuda``, SB3's convention.

Only the updates move to a GPU. Env stepping stays on the CPU, and so does the action noise,
drawn from the algorithm's CPU generators wherever the network runs: a run on a GPU sees the
same random streams as on the CPU, and differs from it only by the rounding of the GPU's
kernels. Checkpoints hold CPU tensors, so a checkpoint saved on one device loads on the other
(``metabench evaluate --device cpu`` meta-tests a GPU run where there is no GPU).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DeviceError", "device_name", "resolve_device", "to_cpu"]


class DeviceError(ValueError):
    """A device that does not exist here, or a name that is not one."""


def resolve_device(name: str | torch.device) -> torch.device:
    """The device ``name`` means on this machine: ``auto`` picks ``cuda`` when torch sees a GPU.

    :raises DeviceError: for an unknown name, or ``cuda`` where torch sees no GPU.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    text = str(name)
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise DeviceError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {text!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {text!r}: torch sees no CUDA GPU here (torch {torch.__version__}); use "
                f"--device cpu, or auto to take a GPU only where there is one"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {text!r}: torch sees {torch.cuda.device_count()} GPU(s), numbered from 0"
            )
    return device


def device_name(device: torch.device) -> str:
    """What a result records of ``device``: ``cpu``, or the GPU's model (``cuda: NVIDIA H100``)."""
    if device.type != "cuda":
        return device.type
    return f"cuda: {torch.cuda.get_device_name(device)}"


def to_cpu(value: Any) -> Any:
    """``value`` with every tensor inside (dicts, lists, tuples) on the CPU; a CPU tensor is
    returned as it is, so on a CPU run this changes nothing."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(item) for item in value)
    return value
