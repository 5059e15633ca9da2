"""A real Slurm cluster on localhost for tests: munged, slurmctld and slurmd from
Debian's slurm-wlm and munge, all state in one temporary directory, ports free now.

`install()` finds the daemons, or installs them with apt-get where it can (root on
Debian), else says in one line why not. `Cluster(directory)` is a context manager:
it starts the daemons, waits for the node to be idle, and on leaving cancels every
job, waits for their processes and stops the daemons it started (always, even after
a failure).
"""

import os
import shutil
import signal
import socket
import subprocess
import time

TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "slurmctld", "slurmd", "munged")
MUNGE_PID = "/run/munge/munged.pid"

CONF = """\
ClusterName=zootest
SlurmctldHost={host}
SlurmUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
# A requeued job waits cred_expire seconds (120 by default) before it may start again.
AuthInfo=cred_expire=15
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=30
NodeName={host} CPUs={cpus} RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _on_path(names):
  paths = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"
  return all(shutil.which(n, path=paths) for n in names)


def install():
  """None when Slurm and munge are here (installed now if need be), else the one
  line that says why the real-Slurm test cannot run."""
  if _on_path(TOOLS):
    return None
  if os.geteuid() != 0:
    return "slurm-wlm and munge are not installed, and installing needs root"
  if not os.path.exists("/etc/debian_version") or shutil.which("apt-get") is None:
    return "slurm-wlm and munge are not installed, and this is not Debian (apt-get)"
  env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
  result = subprocess.run(["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"],
                          env=env, capture_output=True, text=True, check=False)
  if result.returncode or not _on_path(TOOLS):
    last = (result.stderr.strip().splitlines() or ["?"])[-1]
    return f"apt-get install slurm-wlm munge failed ({last})"
  return None


def free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def _alive(pid):
  try:
    os.kill(pid, 0)
    return True
  except (ProcessLookupError, PermissionError):
    return False


def _stop(pid_file, timeout=30):
  """SIGTERM the process in pid_file, SIGKILL after `timeout` s."""
  try:
    with open(pid_file) as f:
      pid = int(f.read().split()[0])
  except (OSError, ValueError, IndexError):
    return
  if not _alive(pid):
    return
  os.kill(pid, signal.SIGTERM)
  deadline = time.monotonic() + timeout
  while _alive(pid) and time.monotonic() < deadline:
    time.sleep(0.2)
  if _alive(pid):
    os.kill(pid, signal.SIGKILL)


class Cluster:
  """One node (this host, `cpus` CPUs) and one partition, in `directory`."""

  def __init__(self, directory, cpus=2):
    self.dir = directory
    self.host = socket.gethostname().split(".")[0]
    self.cpus = cpus
    self.conf = os.path.join(directory, "slurm.conf")
    self.env = dict(os.environ, SLURM_CONF=self.conf)
    self._started_munged = False

  def run(self, *argv, check=True, timeout=60):
    """A Slurm command against this cluster (CompletedProcess, text)."""
    return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                          check=check, timeout=timeout)

  def _start_munged(self):
    if subprocess.run("munge -n | unmunge", shell=True, capture_output=True,
                      check=False).returncode == 0:
      return  # already running (started by someone else: left running)
    os.makedirs("/run/munge", exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=True)
    self._started_munged = True

  def __enter__(self):
    for sub in ("state", "spool"):
      os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
    ctld_port, d_port = free_ports(2)
    with open(self.conf, "w") as f:
      f.write(CONF.format(host=self.host, ctld_port=ctld_port, d_port=d_port,
                          dir=self.dir, cpus=self.cpus))
    try:
      self._start_munged()
      subprocess.run(["/usr/sbin/slurmctld", "-i"], env=self.env, check=True)
      subprocess.run(["/usr/sbin/slurmd"], env=self.env, check=True)
      self.wait_idle()
    except BaseException:
      self.__exit__(None, None, None)
      raise
    return self

  def wait_idle(self, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      out = self.run("sinfo", "--noheader", "--format=%t", check=False).stdout.split()
      if out and out[0] == "idle":
        return
      time.sleep(0.5)
    raise RuntimeError(f"the Slurm node is not idle after {timeout} s: see "
                       f"{self.dir}/slurmctld.log and slurmd.log")

  def jobs(self):
    """{job id: state} of the jobs Slurm knows."""
    out = self.run("squeue", "--noheader", "--states=all", "--format=%i %T",
                   check=False).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())

  def __exit__(self, *exc):
    try:
      if os.path.exists(os.path.join(self.dir, "slurmctld.pid")):
        self.run("scancel", "--user=root", "--full", check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            s in ("RUNNING", "COMPLETING", "PENDING", "CONFIGURING", "REQUEUED")
            for s in self.jobs().values()):
          time.sleep(0.5)
    finally:
      _stop(os.path.join(self.dir, "slurmd.pid"))
      _stop(os.path.join(self.dir, "slurmctld.pid"))
      if self._started_munged:
        _stop(MUNGE_PID)
    return False
