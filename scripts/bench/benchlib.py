"""Helpers shared by the `bench_*.py` scripts: the machine line, the benchmarks page, fresh worker
processes, side-by-side runs against a baseline commit, the matmul peak and the model FLOP count."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEADER = "# Benchmarks\n\nEach section is written by a script in `scripts/bench/`.\n"


def machine() -> str:
    """CPU model, logical CPUs, torch version and threads (when torch is loaded), Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    torch = sys.modules.get("torch")
    t = f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""
    return f"{cpu}, {os.cpu_count()} logical CPUs{t}, Python {platform.python_version()}"


def keep_freed_memory() -> None:
    """What every command does first (`musicgen.allocator`), where the tree under test has it
    (older trees do not): a worker then measures what a user runs."""
    try:
        from musicgen.allocator import keep_freed_memory as keep
    except ImportError:
        return
    keep()


def write_section(path: str | Path, heading: str, body: str) -> None:
    """Replace the text from `heading` (e.g. '## model') to the next `## ` heading, or append."""
    from musicgen.io import atomic_write_text

    path = Path(path)
    doc = path.read_text() if path.is_file() else ""
    if not doc.strip():
        doc = HEADER
    body = body.rstrip("\n") + "\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: body + "\n", doc, count=1).rstrip("\n") + "\n"
    else:
        doc = doc.rstrip("\n") + "\n\n" + body
    atomic_write_text(path, doc)


def rss_mib() -> float:
    """This process's resident memory now (MiB), from /proc."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_worker(cmd: list[str], what: str, code: Path | None = None) -> dict | None:
    """Run one measurement in a fresh process (clean peak memory); its last stdout line is JSON.
    `code`: the source tree whose `musicgen` the worker imports (default: this one). A failure is
    reported on stderr and gives None, so the other measurements still run."""
    env = dict(os.environ, PYTHONPATH=str(code or ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        print(f"{what}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ side by side with a baseline


@contextlib.contextmanager
def code_trees(baseline: str | None) -> Iterator[list[tuple[str, Path]]]:
    """[("new", this tree)] plus ("base", a temporary `git worktree` of `baseline`) if given; the
    worktree is removed afterwards. Workers import `musicgen` from the tree they are given."""
    trees = [("new", ROOT)]
    if not baseline:
        yield trees
        return
    tmp = Path(tempfile.mkdtemp(prefix="musicgen-baseline-")) / "tree"
    git = ["git", "-C", str(ROOT)]
    subprocess.run(
        git + ["worktree", "add", "--detach", str(tmp), baseline], check=True, capture_output=True
    )
    try:
        yield trees + [("base", tmp)]
    finally:
        subprocess.run(git + ["worktree", "remove", "--force", str(tmp)], capture_output=True)
        shutil.rmtree(tmp.parent, ignore_errors=True)


def describe(rev: str) -> str:
    """'abc1234 subject' of a revision (or the revision itself outside git)."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", rev], capture_output=True, text=True
    )
    return out.stdout.strip() or rev


def interleaved(
    trees: list[tuple[str, Path]], repeats: int, run: Callable[[str, Path], dict | None]
) -> dict[str, list[dict]]:
    """`run(label, tree)` `repeats` times per tree, alternating trees (and which goes first), so
    both see the same machine load; results per label (failures dropped)."""
    out: dict[str, list[dict]] = {label: [] for label, _ in trees}
    for i in range(repeats):
        for label, tree in trees if i % 2 == 0 else trees[::-1]:
            r = run(label, tree)
            if r is not None:
                out[label].append(r)
    return out


def bandwidth_gbs(n_bytes: int = 512 * 2**20, repeats: int = 5) -> float:
    """Copy a large tensor: (read + write) bytes / best time."""
    import torch

    x = torch.ones(n_bytes // 4)
    y = torch.empty_like(x)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        y.copy_(x)
        best = min(best, time.perf_counter() - t0)
    return 2 * n_bytes / best / 1e9


def weight_bytes_per_token(model, d_model: int) -> int:
    """Every parameter is read once per step, except the embedding table (one row)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.embed.weight
    tied = model.head.weight is emb
    return total - (0 if tied else emb.numel() * emb.element_size()) + d_model * emb.element_size()


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# ------------------------------------------------------------------ FLOPs


def matmul_peak_gflops(n: int = 2048, repeats: int = 4, dtype: str = "fp32") -> float:
    """GFLOP/s of an n x n matmul in `dtype` (fp32 or bf16) in this process (threads as set): the
    best of `repeats`. bf16 runs on the CPU's bf16 units where it has them (AMX, AVX512-BF16)."""
    import torch

    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def forward_flops(m, batch: int, n: int) -> dict[str, float]:
    """Multiply-add FLOPs (x2) of one forward of a Performer config `m` (a ModelConfig) over
    (batch, n) tokens, by part: "dense" (every Linear and the head: 2 x weights x tokens), "attn"
    (feature maps and the chunked causal attention of the linear layers, q k^T and the weighted
    sum of values over the keys each query sees in the windowed softmax layers) and "spe" (code
    tables once per forward, then the linear layers' contractions with q and k)."""
    tokens, d, hd = batch * n, m.d_model, m.d_model // m.n_heads
    vocab = m.vocab_size or 345
    dense = 2 * tokens * (m.n_layers * (4 * d * d + 2 * d * m.d_ff) + d * vocab)
    n_local = len(m.local_layers)
    n_linear = m.n_layers - n_local
    spe = m.pe in ("sine_spe", "conv_spe")
    e = m.num_realizations if spe else hd  # the feature map's input size
    f = m.n_features if m.feature_map == "favor" else e
    c = min(m.chunk_size, n)
    per_pos = 2 * c * f + 2 * c * (hd + 1) + 4 * f * (hd + 1)  # in-chunk, summaries, carried
    if m.feature_map == "favor":
        per_pos += 2 * 2 * e * f  # phi(q), phi(k) exponents
    w = m.local_window
    keys = (n + 1) / 2 if n <= w else (w * (w + 1) / 2 + (n - w) * w) / n  # mean keys per query
    attn = tokens * m.n_heads * (n_linear * per_pos + n_local * 4 * keys * hd)
    spe_flops = 0.0
    if spe:
        r, cells = m.num_realizations, n * m.n_heads * hd
        if m.pe == "sine_spe":
            build = 2 * 2 * cells * 2 * m.num_sines * r  # Omega (N, H, D, 2K) @ lambda Z
        else:  # both P-tap filters over every (position, channel, realisation), the direct
            # correlation's count (the blocked Toeplitz GEMMs do about (P + 64) / P of it)
            build = 2 * 2 * m.kernel_size * cells * r
        n_tables = 1 if m.spe_shared else n_linear
        contract = 2 * 2 * tokens * m.n_heads * hd * r * (2 if m.gated else 1)
        spe_flops = n_tables * build + n_linear * contract
    return {"dense": float(dense), "attn": float(attn), "spe": float(spe_flops)}


def train_flops(m, batch: int, n: int) -> float:
    """One training step: forward + backward = 3 x the forward's FLOPs (6 x weights x tokens for
    the dense part)."""
    return 3 * sum(forward_flops(m, batch, n).values())
