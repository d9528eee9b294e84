"""Device choice shared by every module that runs torch code."""

from __future__ import annotations

import os

import torch


def pick_device(preferred: str | None = None) -> torch.device:
    """Return the torch device to compute on.

    Order: an explicit ``preferred`` ("cpu", "cuda", "cuda:1", "mps"), then the ``FLARE_DEVICE``
    environment variable, then CUDA, then MPS, then CPU.
    """
    choice = preferred or os.environ.get("FLARE_DEVICE")
    if choice:
        device = torch.device(choice)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {choice!r} was asked for but CUDA is not available on this machine")
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"device {choice!r} was asked for but MPS is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch (CPU and CUDA) and return a CPU generator seeded the same way."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)
