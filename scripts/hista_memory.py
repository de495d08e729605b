"""Peak extra memory of fast Hista: analytic (from the chunk plan) and measured.

    python scripts/hista_memory.py                       # B=8, G=16, T=4096, D=2048, bf16
    python scripts/hista_memory.py --cpu-size 1024 512   # the reduced CPU run's T and D

"Extra" means beyond the inputs (hidden [B, G, T, D], mask, rewards). The analytic number is
``fast.hista.memory_plan``. With CUDA the full size is run and ``torch.cuda.max_memory_allocated``
is measured. Without CUDA the full size is not run (unless ``--cpu-full``): a reduced size is run
in a child process and its peak resident set size above the inputs is measured (the CPU allocator
returns large blocks to the OS, so the RSS peak tracks the live tensors), next to the analytic
number for that size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing it

import torch  # noqa: E402

from advest.fast.hista import CHUNK_BYTES, hista, memory_plan  # noqa: E402

MiB = 2**20


def _inputs(
    B: int, G: int, T: int, D: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bf16 hidden states filled in place, group by group (no float32 staging copy)."""
    hidden = torch.empty(B, G, T, D, dtype=torch.bfloat16, device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    for b in range(B):
        hidden[b].normal_(generator=gen)
        hidden[b] += 3.0  # a common component, as in real (anisotropic) hidden states
    mask = torch.ones(B, G, T, dtype=torch.bool, device=device)
    rewards = (torch.rand(B, G, generator=gen, device=device) > 0.5).float()
    return hidden, mask, rewards


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def measure_cpu(B: int, G: int, T: int, D: int, chunk_bytes: int) -> dict[str, float]:
    """Run once on CPU; peak RSS above the inputs (ru_maxrss is the process's lifetime peak, so
    this runs in a fresh child whose earlier peak is the inputs themselves)."""
    torch.set_num_threads(2)
    hidden, mask, rewards = _inputs(B, G, T, D, "cpu")
    before_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = _rss()
    start = time.perf_counter()
    out = hista(hidden, mask, rewards, chunk_bytes=chunk_bytes)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert bool(torch.isfinite(out).all())
    return {
        "peak_extra_mib": (peak - base) / MiB,
        "earlier_peak_above_inputs_mib": max(0, before_peak - base) / MiB,
        "seconds": seconds,
    }


def measure_cuda(B: int, G: int, T: int, D: int, chunk_bytes: int) -> dict[str, float]:
    hidden, mask, rewards = _inputs(B, G, T, D, "cuda")
    hista(hidden[:1, :, :64], mask[:1, :, :64], rewards[:1])  # warm-up (kernels, workspaces)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    out = hista(hidden, mask, rewards, chunk_bytes=chunk_bytes)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return {"peak_extra_mib": peak / MiB, "seconds": seconds}


def _child(args: argparse.Namespace, T: int, D: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", str(T), str(D)]
    cmd += ["--B", str(args.B), "--G", str(args.G), "--chunk-bytes", str(args.chunk_bytes)]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    out: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def _report(label: str, B: int, G: int, T: int, D: int, chunk_bytes: int) -> None:
    plan = memory_plan(B, G, T, D, dtype=torch.bfloat16, chunk_bytes=chunk_bytes)
    parts = ", ".join(f"{k} {v / MiB:.1f}" for k, v in plan.items() if k != "peak")
    print(f"{label} B={B} G={G} T={T} D={D} bf16, chunk_bytes={chunk_bytes / MiB:.0f} MiB")
    print(f"  hidden input: {B * G * T * D * 2 / MiB:.0f} MiB")
    print(f"  analytic peak extra: {plan['peak'] / MiB:.1f} MiB ({parts})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--B", type=int, default=8)
    p.add_argument("--G", type=int, default=16)
    p.add_argument("--T", type=int, default=4096)
    p.add_argument("--D", type=int, default=2048)
    p.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES)
    p.add_argument("--cpu-size", type=int, nargs=2, default=(1024, 512), metavar=("T", "D"))
    p.add_argument("--cpu-full", action="store_true", help="also run the full size on CPU")
    p.add_argument("--child", type=int, nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        t, d = args.child
        print(json.dumps(measure_cpu(args.B, args.G, t, d, args.chunk_bytes)))
        return
    _report("full size:", args.B, args.G, args.T, args.D, args.chunk_bytes)
    if torch.cuda.is_available():
        m = measure_cuda(args.B, args.G, args.T, args.D, args.chunk_bytes)
        print(
            f"  measured (cuda max_memory_allocated): {m['peak_extra_mib']:.1f} MiB, "
            f"{m['seconds']:.3f} s"
        )
        return
    sizes = [tuple(args.cpu_size)] + ([(args.T, args.D)] if args.cpu_full else [])
    for T, D in sizes:
        if (T, D) != (args.T, args.D):
            _report("reduced CPU run:", args.B, args.G, T, D, args.chunk_bytes)
        m = _child(args, T, D)
        print(
            f"  measured at T={T} D={D} (CPU peak RSS above the inputs): "
            f"{m['peak_extra_mib']:.1f} MiB, "
            f"{m['seconds']:.2f} s (earlier peak above inputs: "
            f"{m['earlier_peak_above_inputs_mib']:.1f} MiB)"
        )


if __name__ == "__main__":
    main()
