"""Helpers shared by the `bench_*.py` scripts: the machine line and the benchmarks page."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from musicgen.io import atomic_write_text

HEADER = "# Benchmarks\n\nEach section is written by a script in `scripts/`.\n"


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


def write_section(path: str | Path, heading: str, body: str) -> None:
    """Replace the text from `heading` (e.g. '## model') to the next `## ` heading, or append."""
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


def run_worker(cmd: list[str], what: str) -> dict | None:
    """Run one measurement in a fresh process (clean peak memory); its last stdout line is JSON.
    A failure is reported on stderr and gives None, so the other measurements still run."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        print(f"{what}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])
