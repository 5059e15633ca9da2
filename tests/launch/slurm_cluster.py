"""A real Slurm cluster on this machine for tests: munged, slurmctld and slurmd from
Debian's slurm-wlm and munge, all state in one temporary directory, ports free now.
The cluster's munged is its own (its socket, pid file, log and seed in the directory,
named by `AuthInfo=socket=`), so two clusters at once (two tests) never share one: a
shared munged stopped by the cluster that started it took the other's authentication
with it.

`install(nodes)` finds the daemons (and, for several nodes, iproute2 and root),
installing Slurm with apt-get where it can (root on Debian), else says in one line why
not; `tests.real_parts.missing` turns that line into the test's end: a failure under CI=true,
a skip elsewhere. `Cluster(directory, nodes=N)` is a context manager: it starts the
daemons, waits for every node to be idle, and on leaving cancels every job, waits for
their processes and stops the daemons it started (always, even after a failure).

One node is this host. Several nodes are several hosts: each node's slurmd runs in a
network namespace of its own (`ip netns`), joined by a veth pair to a bridge on the
host, with an address of its own in a private /24 (10.233.K.0/24, on that bridge only)
and its own /etc/hosts (/etc/netns/<namespace>/hosts, mounted over /etc/hosts in
the slurmd's mount namespace) naming every node, as a cluster's DNS would; slurmctld listens on the bridge's address. The
nodes are named n9, n10, ... : their string order (n10 before n9) is not Slurm's.
`kill_node(i)` ends a node as a machine that dies (its cable cut, every process in it
SIGKILLed: no FIN or RST reaches its peers); `revive_node(i)` brings it back.
Everything made (namespaces, links, bridge, /etc/netns entries, daemons) carries this
process's id in its name; it is removed on leaving, at exit, on SIGTERM, and, for a
run that was SIGKILLed, by the next run (`remove_stale`).
"""

import atexit
import glob
import ipaddress
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time

TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "slurmctld", "slurmd", "munged")
MUNGE = "munge"  # the cluster's munged's subdirectory (owned by the munge user)
# Names of what a multi-node cluster makes: network namespaces <NETNS>-<pid>-<node>,
# links <LINK><b|h><pid>x<node> (bridge, host end of a node's veth pair), and the
# cluster directory's owner file.
NETNS = "zoo-slurm"
LINK = "zs"
OWNER = "owner.pid"
SUBNET = "10.233.{}.0/24"
# squeue's states of a job not yet ended.
ACTIVE = ("RUNNING", "COMPLETING", "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING")
# slurmctld marks a node that does not answer DOWN after this many seconds (300 by
# default); it pings every SlurmdTimeout / 3.
SLURMD_TIMEOUT = 20

CONF = """\
ClusterName=zootest
SlurmctldHost={ctld_host}
SlurmUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
# A requeued job waits cred_expire seconds (120 by default) before it may start again.
AuthInfo=cred_expire=15,socket={dir}/munge/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout={slurmd_timeout}
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
# slurmstepd logs each task's end ("task 1 (4242) exited with exit code 200.").
SlurmdDebug=verbose
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=30
{nodes}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


def _on_path(names):
  paths = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"
  return all(shutil.which(n, path=paths) for n in names)


def install(nodes=1):
  """None when Slurm and munge are here (installed now if need be) and, for several
  nodes, network namespaces can be made; else the one line that says why not."""
  if nodes > 1:
    if os.geteuid() != 0:
      return "several nodes are network namespaces, which need root"
    if not _on_path(["ip"]):
      return "several nodes are network namespaces: `ip` (iproute2) is not installed"
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


def alive(pid):
  """Whether process `pid` runs (a zombie, killed but not yet reaped, does not)."""
  try:
    os.kill(pid, 0)
  except (ProcessLookupError, PermissionError):
    return False
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except (OSError, IndexError):
    return True


def _read_pid(pid_file):
  try:
    with open(pid_file) as f:
      return int(f.read().split()[0])
  except (OSError, ValueError, IndexError):
    return None


def _command(pid):
  try:
    with open(f"/proc/{pid}/comm") as f:
      return f.read().strip()
  except OSError:
    return ""


def _stop(pid_file, timeout=30, ours_only=False):
  """SIGTERM the process in pid_file, SIGKILL after `timeout` s (with ours_only, only
  a Slurm daemon or munged: a stale pid file's number may be another process's now)."""
  pid = _read_pid(pid_file)
  if pid is None or not alive(pid):
    return
  if ours_only and not _command(pid).startswith(("slurm", "munged")):
    return
  if not _signal_and_wait(pid, signal.SIGTERM, timeout):
    os.kill(pid, signal.SIGKILL)


def _signal_and_wait(pid, signum, timeout):
  """Send `signum` to `pid`; whether it is gone (`alive` says not) within `timeout` s."""
  os.kill(pid, signum)
  deadline = time.monotonic() + timeout
  while alive(pid):
    if time.monotonic() > deadline:
      return False
    time.sleep(0.05)
  return True


def _ip(*argv, check=True):
  return subprocess.run(["ip", *argv], capture_output=True, text=True, check=check)


def _kill_namespace_processes(namespace):
  """SIGKILLs every process in the network namespace (until none is left)."""
  for _ in range(50):
    pids = [int(p) for p in _ip("netns", "pids", namespace, check=False).stdout.split()]
    if not pids:
      return
    for pid in pids:
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    time.sleep(0.1)


def _remove_network(owner):
  """Removes owner's namespaces (their processes first), links, bridge and /etc/netns
  entries; what is already gone is skipped."""
  for namespace in _ip("netns", "list", check=False).stdout.split("\n"):
    name = namespace.split(" ")[0]
    if name.startswith(f"{NETNS}-{owner}-"):
      _kill_namespace_processes(name)
      _ip("netns", "delete", name, check=False)
  for etc in glob.glob(f"/etc/netns/{NETNS}-{owner}-*"):
    shutil.rmtree(etc, ignore_errors=True)
  for kind in ("h", "b"):  # veth ends before the bridge
    for link in _links():
      if link.startswith(f"{LINK}{kind}{owner}"):
        _ip("link", "delete", link, check=False)


def _links():
  out = _ip("-o", "link", "show", check=False).stdout
  return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
          if line.count(":") >= 2]


def remove_stale():
  """Removes what runs whose process is gone left behind (a run SIGKILLed, e.g. by a
  test timeout): their daemons (by the pid files in cluster directories whose owner is
  gone) and their namespaces, links and bridges (by the owner's id in their names)."""
  for owner_file in glob.glob(f"/tmp/{NETNS}-*/{OWNER}"):
    owner = _read_pid(owner_file)
    if owner is None or alive(owner):
      continue
    directory = os.path.dirname(owner_file)
    for pid_file in glob.glob(os.path.join(directory, "*.pid")) + glob.glob(
        os.path.join(directory, MUNGE, "*.pid")):
      _stop(pid_file, timeout=5, ours_only=True)
    shutil.rmtree(directory, ignore_errors=True)
  owners = set()
  for namespace in _ip("netns", "list", check=False).stdout.split("\n"):
    parts = namespace.split(" ")[0][len(NETNS) + 1:].split("-")
    if namespace.startswith(f"{NETNS}-") and parts[0].isdigit():
      owners.add(int(parts[0]))
  for link in _links():
    digits = link[len(LINK) + 1:].split("x")[0]
    if link.startswith(LINK) and link[len(LINK):len(LINK) + 1] in ("b", "h") and (
        digits.isdigit()):
      owners.add(int(digits))
  for owner in owners:
    if not alive(owner):
      _remove_network(owner)


def _free_subnet():
  """A 10.233.K.0/24 that no address of this host is in."""
  used = _ip("-4", "-o", "addr", "show", check=False).stdout
  start = os.getpid() % 250
  for k in range(250):
    net = ipaddress.ip_network(SUBNET.format((start + k) % 250 + 1))
    if f"inet {'.'.join(str(net[0]).split('.')[:3])}." not in used:
      return net
  raise RuntimeError("no free 10.233.K.0/24 for the test cluster's network")


_SIGTERM_INSTALLED = []


def _interrupt(signum, frame):
  del signum, frame
  raise KeyboardInterrupt("SIGTERM")


def _interrupt_on_sigterm():
  """A SIGTERM (Bazel's timeout) ends the test run as Ctrl-C does (unittest records a
  SystemExit as one test's error and goes on; it lets KeyboardInterrupt through), so
  that the clusters' cleanups (finally, atexit) run; only where nobody else handles
  SIGTERM."""
  if not _SIGTERM_INSTALLED and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _interrupt)
    _SIGTERM_INSTALLED.append(True)


class Cluster:
  """`nodes` nodes of `cpus` CPUs each and one partition, in `directory`: one node is
  this host; several are network namespaces (see the module's docstring)."""

  def __init__(self, directory, cpus=2, nodes=1):
    self.dir = directory
    self.cpus = cpus
    self.count = nodes
    self.host = socket.gethostname().split(".")[0]
    self.names = [self.host] if nodes == 1 else [f"n{9 + i}" for i in range(nodes)]
    self.conf = os.path.join(directory, "slurm.conf")
    self.env = dict(os.environ, SLURM_CONF=self.conf)
    self.owner = os.getpid()
    self.namespaces = [f"{NETNS}-{self.owner}-{i}" for i in range(nodes)]
    self.addresses = []
    self._closed = False

  def run(self, *argv, check=True, timeout=60):
    """A Slurm command against this cluster (CompletedProcess, text)."""
    return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                          check=check, timeout=timeout)

  def _start_munged(self):
    """The cluster's own munged, run as the munge user (munged refuses root), its
    files in `dir`/munge (its own, searchable by all, writable by none else: munged
    checks both of the socket's directory)."""
    os.chmod(self.dir, 0o711)
    path = os.path.join(self.dir, MUNGE)
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    shutil.chown(path, "munge", "munge")
    argv = ["/usr/sbin/munged", f"--socket={path}/munge.socket",
            f"--pid-file={path}/munged.pid", f"--log-file={path}/munged.log",
            f"--seed-file={path}/munged.seed"]
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", shlex.join(argv)], check=True)

  def _link(self, kind, node=None):
    return f"{LINK}{kind}{self.owner}" + ("" if node is None else f"x{node}")

  def _make_network(self):
    """The bridge (with slurmctld's address), and a namespace a node, joined to it."""
    net = _free_subnet()
    self.ctld_address = str(net[1])
    self.addresses = [str(net[10 + i]) for i in range(self.count)]
    bridge = self._link("b")
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{self.ctld_address}/24", "dev", bridge)
    _ip("link", "set", bridge, "up")
    hosts = "127.0.0.1 localhost\n" + f"{self.ctld_address} {self.host}\n" + "".join(
        f"{a} {n}\n" for a, n in zip(self.addresses, self.names))
    for i, (namespace, address) in enumerate(zip(self.namespaces, self.addresses)):
      _ip("netns", "add", namespace)
      os.makedirs(f"/etc/netns/{namespace}", exist_ok=True)
      with open(f"/etc/netns/{namespace}/hosts", "w") as f:
        f.write(hosts)
      outer, inner = self._link("h", i), self._link("n", i)
      _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
      _ip("link", "set", outer, "master", bridge)
      _ip("link", "set", outer, "up")
      _ip("link", "set", inner, "netns", namespace)
      _ip("-n", namespace, "link", "set", "lo", "up")
      _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", inner)
      _ip("-n", namespace, "link", "set", inner, "up")

  def _conf_text(self, ctld_port, d_port):
    if self.count == 1:
      ctld_host = self.host
      nodes = [f"NodeName={self.host} CPUs={self.cpus} RealMemory=4000 State=UNKNOWN"]
    else:
      ctld_host = f"{self.host}({self.ctld_address})"
      nodes = [f"NodeName={n} NodeAddr={a} CPUs={self.cpus} RealMemory=4000 "
               "State=UNKNOWN" for n, a in zip(self.names, self.addresses)]
    return CONF.format(ctld_host=ctld_host, ctld_port=ctld_port, d_port=d_port,
                       dir=self.dir, slurmd_timeout=SLURMD_TIMEOUT, nodes="\n".join(nodes),
                       names=",".join(self.names))

  def start_slurmd(self, node):
    """Starts node `node`'s slurmd (in its namespace when there are several). Not `ip
    netns exec`, which mounts a fresh /sys without the cgroup file systems slurmd
    needs ("Unable to initialize cgroup plugin"): nsenter into the network namespace,
    then a mount namespace of its own in which /etc/hosts is the node's."""
    argv = ["/usr/sbin/slurmd", "-N", self.names[node]]
    if self.count > 1:
      namespace = self.namespaces[node]
      argv = ["nsenter", f"--net=/run/netns/{namespace}", "unshare", "--mount",
              "--propagation", "private", "sh", "-c",
              f'mount --bind /etc/netns/{namespace}/hosts /etc/hosts && exec "$@"', "sh",
              *argv]
    subprocess.run(argv, env=self.env, check=True)

  def __enter__(self):
    _interrupt_on_sigterm()
    atexit.register(self.__exit__, None, None, None)
    try:
      remove_stale()
      for sub in ["state"] + [f"spool-{n}" for n in self.names]:
        os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
      with open(os.path.join(self.dir, OWNER), "w") as f:
        f.write(f"{self.owner}\n")
      ctld_port, d_port = free_ports(2)
      if self.count > 1:
        self._make_network()
      with open(self.conf, "w") as f:
        f.write(self._conf_text(ctld_port, d_port))
      self._start_munged()
      subprocess.run(["/usr/sbin/slurmctld", "-i"], env=self.env, check=True)
      for node in range(self.count):
        self.start_slurmd(node)
      self.wait_idle()
    except BaseException:
      self.__exit__(None, None, None)
      raise
    return self

  def node_states(self):
    """{node name: sinfo's short state} (idle, alloc, down*, ...)."""
    out = self.run("sinfo", "--noheader", "--Node", "--format=%N %t", check=False).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())

  def wait_idle(self, timeout=60, nodes=None):
    """Waits until the nodes (default: all) are idle."""
    names = self.names if nodes is None else [self.names[i] for i in nodes]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      states = self.node_states()
      if all(states.get(n) == "idle" for n in names):
        return
      time.sleep(0.5)
    raise RuntimeError(f"the Slurm nodes are not idle after {timeout} s ({states}): see "
                       f"{self.dir}/slurmctld.log and slurmd-*.log")

  def kill_node(self, node):
    """Node `node` dies as a machine does: its link goes down first (nothing it sends
    reaches anyone, so its peers see silence, not a closed connection), then every
    process in it (slurmd, slurmstepd, the tasks, an srun) is SIGKILLed."""
    assert self.count > 1, "kill_node needs several nodes (namespaces)"
    _ip("link", "set", self._link("h", node), "down")
    _kill_namespace_processes(self.namespaces[node])

  def kill_slurmd(self, node):
    """Node `node`'s slurmd alone dies (SIGKILL), as in a crash: the machine, its link
    and its other processes stay; revive_node starts it again."""
    pid = _read_pid(os.path.join(self.dir, f"slurmd-{self.names[node]}.pid"))
    if pid is not None and alive(pid) and not _signal_and_wait(pid, signal.SIGKILL, 10):
      raise RuntimeError(f"slurmd {self.names[node]} (pid {pid}) outlived SIGKILL by 10 s")

  def revive_node(self, node):
    """The node comes back: its link up, its slurmd started (ReturnToService=2 makes it
    available again once it registers). Nothing to do for a node that runs."""
    _ip("link", "set", self._link("h", node), "up")
    pid = _read_pid(os.path.join(self.dir, f"slurmd-{self.names[node]}.pid"))
    if pid is None or not alive(pid):
      self.start_slurmd(node)

  def settle(self, timeout=90):
    """Between tests: every job cancelled and ended, every node back and idle."""
    self.run("scancel", "--user=root", "--full", check=False)
    if self.count > 1:
      for node in range(self.count):
        self.revive_node(node)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        s in ACTIVE for s in self.jobs().values()):
      time.sleep(0.5)
    self.wait_idle(timeout=max(1, deadline - time.monotonic()))

  def daemon_report(self, lines=30):
    """For a failure's message: whether each daemon (slurmctld, every node's slurmd)
    is alive by its pid file, and the last `lines` lines of its log."""
    parts = []
    for name, pid_file, log in [("slurmctld", "slurmctld.pid", "slurmctld.log")] + [
        (f"slurmd {n}", f"slurmd-{n}.pid", f"slurmd-{n}.log") for n in self.names]:
      pid = _read_pid(os.path.join(self.dir, pid_file))
      state = "alive" if pid is not None and alive(pid) else f"not running (pid {pid})"
      try:
        with open(os.path.join(self.dir, log), errors="replace") as f:
          tail = [line for line in f.read().splitlines() if line.strip()][-lines:]
      except OSError as e:
        tail = [f"(no log: {e})"]
      parts.append(f"--- {name}: {state}; {log}:\n" + "\n".join(tail))
    return "\n".join(parts)

  def processes(self, node, module="recipes.train"):
    """The pids of node `node`'s Python processes running `module` (several nodes:
    those in its network namespace; srun, whose arguments name it too, is not one)."""
    if self.count > 1:
      pids = _ip("netns", "pids", self.namespaces[node], check=False).stdout.split()
    else:
      pids = [p for p in os.listdir("/proc") if p.isdigit()]
    found = []
    for pid in pids:
      try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
          argv = f.read().decode(errors="replace").split("\0")
      except OSError:
        continue
      if "python" in os.path.basename(argv[0]) and module in argv:
        found.append(int(pid))
    return found

  def connections(self, node):
    """[(local address:port, peer address:port)] of node `node`'s established TCP
    connections (several nodes only), IPv4-mapped addresses as plain IPv4."""
    out = subprocess.run(["nsenter", f"--net=/run/netns/{self.namespaces[node]}", "ss",
                          "--tcp", "--numeric", "--no-header", "state", "established"],
                         capture_output=True, text=True, check=False).stdout
    def plain(endpoint):  # [::ffff:10.0.0.1]:80 (a dual-stack socket's) -> 10.0.0.1:80
      host, port = endpoint.rsplit(":", 1)
      host = host.strip("[]")
      return f"{host[len('::ffff:'):] if host.startswith('::ffff:') else host}:{port}"

    return [tuple(plain(e) for e in line.split()[-2:]) for line in out.splitlines()
            if line.strip()]

  def jobs(self):
    """{job id: state} of the jobs Slurm knows."""
    out = self.run("squeue", "--noheader", "--states=all", "--format=%i %T",
                   check=False).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())

  def __exit__(self, *exc):
    if self._closed:
      return False
    self._closed = True
    try:
      if os.path.exists(os.path.join(self.dir, "slurmctld.pid")):
        self.run("scancel", "--user=root", "--full", check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            s in ACTIVE for s in self.jobs().values()):
          time.sleep(0.5)
    finally:
      try:
        for name in self.names:
          _stop(os.path.join(self.dir, f"slurmd-{name}.pid"))
        _stop(os.path.join(self.dir, "slurmctld.pid"))
        _stop(os.path.join(self.dir, MUNGE, "munged.pid"))
      finally:
        if self.count > 1:
          _remove_network(self.owner)
    return False
