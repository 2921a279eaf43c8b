"""Several nodes: two torchrun launchers on 127.0.0.1 joined by a c10d rendezvous act as two
nodes of one process each (docs/training.md, "Several machines"). The ranks agree, only global
rank 0 writes, a SIGTERM to one node stops both with last.pt saved, and the run resumes on
another world size."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from test_train import GLOO_WORKER, TINY, prepared  # noqa: F401  (the module's fixture)

from musicgen.checkpoint import read_payload

TIMEOUT = 300  # seconds for one launcher to finish (the tiny model trains in a few)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(port: int, args: list[str], log: Path) -> subprocess.Popen:
    """One node: a torchrun launcher of one process, in a process group of its own (as a batch
    system starts one per node, and signals the whole group)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
    cmd += ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=musicgen"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MUSICGEN_TEST_KILL_AT_STEP", None)
    return subprocess.Popen(
        cmd + args, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def finish(nodes: list[subprocess.Popen]) -> list[int]:
    """The launchers' exit codes; any still running after TIMEOUT is killed (no test hangs)."""
    codes = []
    for p in nodes:
        try:
            codes.append(p.wait(TIMEOUT))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            codes.append(p.wait())
    return codes


def test_two_nodes_agree_and_only_global_rank_0_writes(prepared, tmp_path):  # noqa: F811
    """Each node gets its own --out: the folder of the node holding global rank 0 has the run,
    the other stays empty; both ranks end with the same weights and read disjoint crops."""
    worker = tmp_path / "worker.py"
    worker.write_text(GLOO_WORKER)
    port, out = free_port(), tmp_path / "rank"
    nodes = [
        launch(
            port,
            [str(worker), str(TINY), str(prepared), str(tmp_path / f"node{i}"), str(out), "none"],
            tmp_path / f"node{i}.log",
        )
        for i in range(2)
    ]
    codes = finish(nodes)
    logs = [(tmp_path / f"node{i}.log").read_text()[-2000:] for i in range(2)]
    assert codes == [0, 0], logs
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    step = r0["step"]
    assert r1["step"] == step >= 2  # 50, or fewer when the worker's one-minute clock ran out
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not set(r0["items"]) & set(r1["items"])
    written = [
        d for d in (tmp_path / "node0", tmp_path / "node1") if d.exists() and any(d.iterdir())
    ]
    assert len(written) == 1  # one writer, global rank 0, wherever c10d placed it
    saved = read_payload(written[0] / "last.pt")
    assert saved["train_state"]["step"] == step
    assert all(torch.equal(a[k], v.float()) for k, v in saved["model"].items())


def test_sigterm_to_one_node_stops_both_and_resumes_on_one_process(prepared, tmp_path):  # noqa: F811
    """The batch system's SIGTERM reaches the node that does not write: both ranks leave at the
    same step, rank 0 saves last.pt, and `train --resume` continues it as a world of one."""
    port = free_port()
    common = [
        "--config",
        str(TINY),
        "--data",
        str(prepared),
        "--train.device=cpu",
        "--train.max_steps=100000",
        "--train.val_every=100000",
        "--log.every=1",
    ]
    outs = [tmp_path / f"node{i}" for i in range(2)]
    nodes = [
        launch(
            port,
            ["-m", "musicgen.cli", "train", *common, "--out", str(outs[i])],
            tmp_path / f"node{i}.log",
        )
        for i in range(2)
    ]
    deadline = time.time() + TIMEOUT
    writer = None
    while writer is None and time.time() < deadline:  # the writer's log reaches step 3
        for i, out in enumerate(outs):
            log = out / "log.jsonl"
            if log.exists() and log.read_text().count('"kind": "train"') >= 3:
                writer = i
        time.sleep(0.2)
    assert writer is not None, [(tmp_path / f"node{i}.log").read_text()[-2000:] for i in (0, 1)]
    other = 1 - writer
    os.killpg(nodes[other].pid, signal.SIGTERM)
    codes = finish(nodes)
    logs = [(tmp_path / f"node{i}.log").read_text()[-2000:] for i in range(2)]
    assert codes[writer] == 0 and codes[other] != 0, logs
    assert not outs[other].exists() or not any(outs[other].iterdir())
    step = read_payload(outs[writer] / "last.pt")["train_state"]["step"]
    assert 3 <= step < 100000
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "musicgen.cli",
            "train",
            *common[:-3],
            "--train.val_every=2",
            f"--train.max_steps={step + 2}",
            "--out",
            str(outs[writer]),
            "--resume",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "world 1" in resumed.stdout
    assert read_payload(outs[writer] / "last.pt")["train_state"]["step"] == step + 2
    rows = [json.loads(x) for x in (outs[writer] / "log.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in rows if r["kind"] == "train"]
    assert train_steps == list(range(1, step + 3))
