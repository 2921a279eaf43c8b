"""Device and dtype choices shared by every command: CUDA, else Apple's MPS, else the CPU."""

from __future__ import annotations

import torch

from musicgen.errors import MusicgenError


def pick_device(name: str = "auto", index: int = 0) -> torch.device:
    """`auto` | `cpu` | `cuda` | `cuda:N` | `mps`; `index` picks the GPU of a torchrun rank."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", index)
        mps = getattr(torch.backends, "mps", None)
        return torch.device("mps" if mps is not None and mps.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise MusicgenError(f"device: unknown device '{name}'") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise MusicgenError("device: CUDA was asked for but is not available")
        if device.index is None:
            device = torch.device("cuda", index)
        elif device.index >= torch.cuda.device_count():
            raise MusicgenError(
                f"device: {name} does not exist (this machine has "
                f"{torch.cuda.device_count()} CUDA device(s))"
            )
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise MusicgenError("device: MPS (Apple GPU) was asked for but is not available")
    elif device.type != "cpu":
        raise MusicgenError(
            f"device: unsupported device '{name}'; use auto, cpu, cuda, cuda:N or mps"
        )
    return device


def as_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in `dtype`, without an operator call when it already is: on the one-token paths
    (the fused step, the sampler) every call costs microseconds, even one that changes nothing."""
    return x if x.dtype == dtype else x.to(dtype)
