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
from musicgen.train.run import StepSampler

TIMEOUT = 300  # seconds for one launcher to finish (the tiny model trains in a few)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(node: int, port: int, args: list[str], log: Path) -> subprocess.Popen:
    """One node: a torchrun launcher of one process, in a process group of its own (as a batch
    system starts one per node, and signals the whole group). Node 0 hosts the rendezvous
    store, as the head node named in `--rdzv_endpoint` does on a cluster (both here share one
    address, so it is said explicitly)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
    cmd += ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=musicgen"]
    cmd += [f"--rdzv_conf=is_host={int(node == 0)}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MUSICGEN_TEST_KILL_AT_STEP", None)
    return subprocess.Popen(
        cmd + args, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def children(pid: int) -> list[str]:
    """The processes `pid` started (Linux): a launcher's workers while they run."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.read_text().split() if path.exists() else []


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
            i,
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
    """The batch system's SIGTERM reaches one node: both ranks leave at the same step, global
    rank 0 (on either node) saves last.pt, and `train --resume` continues it as a world of
    one."""
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
            i,
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
    os.killpg(nodes[1].pid, signal.SIGTERM)  # node 1: the node that does not host the store
    signalled = finish(nodes[1:])[0]
    deadline = time.time() + TIMEOUT
    while children(nodes[0].pid) and time.time() < deadline:
        time.sleep(0.2)
    logs = [(tmp_path / f"node{i}.log").read_text()[-2000:] for i in range(2)]
    assert not children(nodes[0].pid), logs  # node 0's rank left too
    # torchrun's launcher on node 0 then waits at its exit barrier (300 s) for node 1's, which
    # the signal ended: the run itself is over, so it is stopped here
    if nodes[0].poll() is None:
        os.killpg(nodes[0].pid, signal.SIGKILL)
    nodes[0].wait()
    assert signalled != 0, logs
    assert not outs[1 - writer].exists() or not any(outs[1 - writer].iterdir())
    saved = read_payload(outs[writer] / "last.pt")["train_state"]
    step, per_step = saved["step"], 4  # tiny.yaml: batch 4, no accumulation
    assert 3 <= step < 100000 and saved["items"] == step * 2 * per_step
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
    saved = read_payload(outs[writer] / "last.pt")["train_state"]
    assert saved["step"] == step + 2  # one rank reads the crops after the two ranks' ones
    assert saved["items"] == (step * 2 + 2) * per_step
    rows = [json.loads(x) for x in (outs[writer] / "log.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in rows if r["kind"] == "train"]
    assert train_steps == list(range(1, step + 3))


def test_a_run_resumed_on_another_world_size_reads_each_crop_once():
    """Three steps on two ranks, then one rank from the crop where they stopped: every crop of
    the stream once, in order (no skip, no repeat)."""
    per_step = 4
    before = [list(StepSampler(0, 3, per_step, r, 2, 0)) for r in (0, 1)]
    after = list(StepSampler(3, 6, per_step, 0, 1, 3 * 2 * per_step))
    seen = sorted(before[0] + before[1]) + after
    assert seen == list(range(3 * 2 * per_step + 3 * per_step))
    assert not set(before[0]) & set(before[1])
