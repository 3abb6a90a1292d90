"""A real Slurm cluster on localhost for the tests: Debian's munged, slurmctld and one slurmd, in a temporary
directory with its own configuration and free ports.

Sixteen GPU nodes with `Gres=gpu:h100:8` under a two-level switch tree (topology/tree: leaf1 gpu[01-08], leaf2
gpu[09-16], leaf3 cpu[01-02], spine above them) and two CPU nodes. gpu01 is a real node: a slurmd started with
`-N gpu01` registers it with eight fake GPU device files (gres.conf `File=`; slurmd drops a GPU without one,
"Removing file-less GPU"), so drain and resume go through a registration as on a real cluster. The others are
`State=CLOUD` nodes, which slurmctld keeps powered down (idle~) without a slurmd [slurm.conf(5) State=CLOUD;
PrivateData=cloud shows them to sinfo]: one machine cannot run a slurmd per node (Debian builds Slurm without
--enable-multiple-slurmd; slurmd.c compiles the per-node ports only `#if defined(MULTIPLE_SLURMD)`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "scontrol")
START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster: its slurm.conf and how to talk to it."""

    root: Path
    conf: Path
    started_in_s: float

    def unreachable_conf(self) -> Path:
        """A copy of the configuration whose controller port nobody listens on (clients give up at once)."""
        (port,) = _free_ports(1)
        lines = [
            f"SlurmctldPort={port}" if ln.startswith("SlurmctldPort=") else ln
            for ln in self.conf.read_text().splitlines()
        ]
        path = self.root / "unreachable" / "slurm.conf"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join([*lines, "MessageTimeout=1"]) + "\n")
        shutil.copy(self.root / "topology.conf", path.parent / "topology.conf")
        return path

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def scontrol(self, *args: str) -> str:
        """Run scontrol against this cluster (fails the test on an error)."""
        proc = subprocess.run(["scontrol", *args], env=self.env(), capture_output=True, text=True, timeout=20)
        assert proc.returncode == 0, f"scontrol {' '.join(args)}: {proc.stderr.strip()}"
        return proc.stdout

    def node_states(self) -> dict[str, list[str]]:
        """Each node's state and flags as `sinfo --json` shows them."""
        proc = subprocess.run(["sinfo", "--json"], env=self.env(), capture_output=True, text=True, timeout=20)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        return {n["name"]: [n["state"].upper(), *n.get("state_flags", [])] for n in doc["nodes"]}

    def wait_node(self, node: str, ready: bool = True, timeout_s: float = 10.0) -> list[str]:
        """Wait until `node` is IDLE with no flag other than CLOUD/POWERED_DOWN (ready) and return its states."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.node_states().get(node, [])
            if (states[:1] == ["IDLE"] and set(states[1:]) <= {"CLOUD", "POWERED_DOWN"}) == ready:
                return states
            assert time.monotonic() < deadline, f"{node} still {states}"
            time.sleep(0.1)


def missing_programs() -> list[str]:
    return [p for p in DAEMONS if shutil.which(p) is None]


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_config(root: Path) -> Path:
    ctld_port, slurmd_port = _free_ports(2)
    host = socket.gethostname().split(".")[0]  # slurmctld compares SlurmctldHost with its short host name
    user = os.environ.get("USER") or ("root" if os.getuid() == 0 else str(os.getuid()))
    for sub in ("state", "spool", "log", "dev", "munge"):
        (root / sub).mkdir(mode=0o700, exist_ok=True)
    for i in range(8):
        (root / "dev" / f"nvidia{i}").touch()
    munge = root / "munge"
    (root / "slurm.conf").write_text(
        f"""ClusterName=meshplan-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
AuthType=auth/munge
AuthInfo=socket={munge}/munge.sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
TopologyPlugin=topology/tree
GresTypes=gpu
PrivateData=cloud
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=INFINITE
NodeName=gpu01 NodeHostname=localhost CPUs=8 RealMemory=1000 Gres=gpu:h100:8
NodeName=gpu[02-16] NodeHostname=localhost CPUs=8 RealMemory=1000 Gres=gpu:h100:8 State=CLOUD
NodeName=cpu[01-02] NodeHostname=localhost CPUs=4 RealMemory=1000 State=CLOUD
PartitionName=gpu Nodes=gpu[01-16] Default=YES State=UP
PartitionName=cpu Nodes=cpu[01-02] State=UP
"""
    )
    (root / "topology.conf").write_text(
        "SwitchName=leaf1 Nodes=gpu[01-08]\n"
        "SwitchName=leaf2 Nodes=gpu[09-16]\n"
        "SwitchName=leaf3 Nodes=cpu[01-02]\n"
        "SwitchName=spine Switches=leaf[1-3]\n"
    )
    (root / "gres.conf").write_text(f"NodeName=gpu01 Name=gpu Type=h100 File={root}/dev/nvidia[0-7]\n")
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    return root / "slurm.conf"


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _signal(pid: int | None, sig: signal.Signals) -> None:
    if pid is not None:
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


def _stop(pid: int | None, timeout_s: float = 5.0) -> None:
    """Wait for a daemon this module started to exit; SIGTERM then SIGKILL it by its pid if it does not."""
    if pid is None:
        return
    deadline = time.monotonic() + timeout_s
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        deadline = time.monotonic() + 2.0


@contextmanager
def slurm_cluster(root: Path) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and gpu01's slurmd under `root`; stop them on exit."""
    conf = _write_config(root)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    munge = root / "munge"
    t0 = time.monotonic()
    subprocess.run(
        ["munged", "--force", f"--socket={munge}/munge.sock", f"--key-file={munge}/munge.key",
         f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"],
        check=True, capture_output=True, timeout=20,
    )  # fmt: skip
    try:
        subprocess.run(["slurmctld", "-i"], env=env, check=True, capture_output=True, timeout=20)
        subprocess.run(["slurmd", "-N", "gpu01"], env=env, check=True, capture_output=True, timeout=20)
        cluster = SlurmCluster(root, conf, 0.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # slurmctld answers, and gpu01's slurmd has registered its eight GPUs
            probe = subprocess.run(["sinfo", "--json"], env=env, capture_output=True, text=True, timeout=20)
            if probe.returncode == 0 and '"gpu:h100:8"' in probe.stdout:
                try:
                    cluster.wait_node("gpu01", timeout_s=0.0)
                    break
                except AssertionError:
                    pass
            if time.monotonic() > deadline:
                log = (root / "log" / "slurmctld.log").read_text()[-2000:]
                raise RuntimeError(f"slurm did not start within {START_TIMEOUT_S:g} s: {probe.stderr}\n{log}")
            time.sleep(0.05)
        yield SlurmCluster(root, conf, time.monotonic() - t0)
    finally:  # SIGTERM is each daemon's own orderly shutdown; the three stop at once
        pids = [_pid(root / "slurmd.pid"), _pid(root / "slurmctld.pid"), _pid(munge / "munged.pid")]
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        for pid in pids:
            _stop(pid)
