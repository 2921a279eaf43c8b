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


def cpu_bf16_units() -> str | None:
    """The bf16 matrix instructions of this CPU that oneDNN uses ('amx_bf16', 'avx512_bf16'), or
    None: bf16 matmuls run 2-5x faster than fp32 where they exist and slower where they do not."""
    cpu = getattr(torch, "cpu", None)
    if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
        return "amx_bf16"
    if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
        return "avx512_bf16"
    return None


BF16_MIN_WIDTH = 128  # CPU autocast: narrower models gain nothing from it (docs/training.md)


def resolve_precision(device: torch.device, precision: str, d_model: int) -> tuple[str, str]:
    """(precision, why): `auto` is bf16 autocast on CUDA, and on CPUs with bf16 units for models
    at least BF16_MIN_WIDTH wide (narrower ones gain nothing: docs/training.md); fp32
    elsewhere. An explicit choice is kept as given."""
    if precision != "auto":
        return precision, "as configured"
    if device.type == "cuda":
        return "bf16", "auto: CUDA"
    units = cpu_bf16_units() if device.type == "cpu" else None
    if not units:
        return "fp32", f"auto: no bf16 units on this {device.type}"
    if d_model < BF16_MIN_WIDTH:
        return (
            "fp32",
            f"auto: d_model {d_model} < {BF16_MIN_WIDTH}, too narrow to gain from bf16 on {units}",
        )
    return "bf16", f"auto: this CPU has {units}"
