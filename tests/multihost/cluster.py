"""A cluster of hosts on one machine (issue 50): network namespaces joined by a bridge, each host
with its own address, its own loopback, its own /dev/shm and its own ephemeral port range, and
MAP's daemons run in them — `mapd` on the coordinator host, a `mapd-worker` on each worker host —
talking over real interfaces: gRPC, the rendezvous store's gate and Gloo between hosts, never
loopback. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), as CI has.

Layout, for a cluster tagged T (10.77.N.0/24, N from T):
  mapd-T-sw        the switch: a bridge, and an nftables table `mapd` filtering what crosses it
  mapd-T-coord     10.77.N.1, mapd on :7070 (metrics :9464); with start_proxy, a delay proxy
                   on :7071 in front of it (delay_proxy.py: the slow link)
  mapd-T-w1 …      10.77.N.11 …, a mapd-worker each (metrics :9465); ephemeral ports 30000-30999,
                   checked by --rank-ports
Nothing is added to the machine's own namespace: the veth pairs live in the host and switch
namespaces, so the cluster's traffic never leaves the namespaces it made.

The switch's filter is the manifests' NetworkPolicy (deploy/k8s/network-policy.yaml) in nftables:
worker to worker only on the rank ports (and their replies), worker to coordinator only on gRPC
(mapd's port, and the proxy's in front of it); a partition adds drop rules for pairs of hosts, ahead
of the rest. With mount_disk, a worker's work directory (or the shared checkpoint storage) is a
tmpfs of its own size, which fill_disk fills (a full disk under checkpoints) and free_disk empties.
"""
import contextlib
import os
import re
import signal
import subprocess
import time

RANK_PORTS = (30000, 30999)
MAPD_PORT, MAPD_METRICS_PORT, WORKER_METRICS_PORT, PROXY_PORT = 7070, 9464, 9465, 7071
FILLER = ".disk-filler"  # fill_disk's file, at the top of the disk it fills


def run(*args, check=True, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r


def available():
    """Why a cluster cannot be made here (None when it can): it needs root, `ip` and `nft`."""
    if os.geteuid() != 0:
        return "the cluster harness makes network namespaces: run it as root (CI does)"
    for tool in ("ip", "nft"):
        if run("sh", "-c", f"command -v {tool}", check=False).returncode != 0:
            return f"{tool} is not installed (scripts/install-deps.sh installs it)"
    return None


class Host:
    def __init__(self, cluster, name, address):
        self.cluster, self.name, self.address = cluster, name, address
        self.netns = f"{cluster.prefix}-{name}"
        self.proc = None  # its daemon
        self.log_path = None

    def exec_args(self, *args, private_shm=False):
        """argv running `args` inside this host's network namespace (and, with private_shm, a
        /dev/shm of its own, so ranks on different hosts never share memory segments)."""
        if not private_shm:
            return ["ip", "netns", "exec", self.netns, *args]
        script = 'mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "sh", "-c", script, "host-shell", *args]

    def pids(self):
        """Every process whose network namespace is this host's."""
        r = run("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in r.stdout.split()]


class Cluster:
    def __init__(self, workdir, workers=4, tag=None, binaries=None):
        self.workdir = str(workdir)
        self.tag = tag or f"{os.getpid() % 100000}"
        self.prefix = f"mapd-{self.tag}"
        self.subnet = 10 + int(self.tag) % 240  # 10.77.N.0/24
        self.binaries = binaries or {
            "mapd": os.environ["MAPD"], "mapd-worker": os.environ["MAPD_WORKER"], "mapctl": os.environ["MAPCTL"]}
        self.switch = f"{self.prefix}-sw"
        self.coordinator = Host(self, "coord", self.ip(1))
        self.workers = [Host(self, f"w{i + 1}", self.ip(11 + i)) for i in range(workers)]
        self.partitions = []  # (a, b) pairs of hosts cut off from each other
        self.proxy = None  # the delay proxy's process (start_proxy): workers then reach mapd through it
        self.disks = []  # work directories mount_disk mounted
        self.token, self.worker_token = "cluster-client-token", "cluster-worker-token"

    def ip(self, last):
        return f"10.77.{self.subnet}.{last}"

    @property
    def hosts(self):
        return [self.coordinator, *self.workers]

    # --- the network ---------------------------------------------------------------------------
    def up(self):
        self.down_network()  # what a crashed earlier run with this tag left
        run("ip", "netns", "add", self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, h in enumerate(self.hosts):
            run("ip", "netns", "add", h.netns)
            run("ip", "-n", h.netns, "link", "set", "lo", "up")
            run("ip", "link", "add", "eth0", "netns", h.netns, "type", "veth", "peer", "name", f"port{i}", "netns", self.switch)
            run("ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            run("ip", "-n", h.netns, "link", "set", "eth0", "up")
            run("ip", "-n", self.switch, "link", "set", f"port{i}", "master", "br0")
            run("ip", "-n", self.switch, "link", "set", f"port{i}", "up")
        for w in self.workers:
            run(*w.exec_args("sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={RANK_PORTS[0]} {RANK_PORTS[1]}"))
        self.apply_filter()
        os.makedirs(self.workdir, exist_ok=True)

    def apply_filter(self):
        """The switch's rules: partitions first (drop both ways), then the network policy."""
        workers = "{ " + ", ".join(w.address for w in self.workers) + " }"
        coord = self.coordinator.address
        lo, hi = RANK_PORTS
        rules = ["table bridge mapd {", "  chain forward {", "    type filter hook forward priority 0; policy drop;",
                 "    ether type arp accept"]
        for a, b in self.partitions:
            rules.append(f"    ip saddr {a.address} ip daddr {b.address} drop")
            rules.append(f"    ip saddr {b.address} ip daddr {a.address} drop")
        rules += [
            f"    ip saddr {workers} ip daddr {coord} tcp dport {{ {MAPD_PORT}, {PROXY_PORT} }} accept",
            f"    ip saddr {coord} ip daddr {workers} tcp sport {{ {MAPD_PORT}, {PROXY_PORT} }} accept",
            f"    ip saddr {coord} ip daddr {workers} tcp dport {WORKER_METRICS_PORT} accept",
            f"    ip saddr {workers} ip daddr {coord} tcp sport {WORKER_METRICS_PORT} accept",
            f"    ip saddr {workers} ip daddr {workers} tcp dport {lo}-{hi} counter accept",
            f"    ip saddr {workers} ip daddr {workers} tcp sport {lo}-{hi} accept",
            "    meta l4proto tcp counter drop", "  }", "}"]
        run("ip", "netns", "exec", self.switch, "nft", "flush", "ruleset")
        run("ip", "netns", "exec", self.switch, "nft", "-f", "-", input="\n".join(rules) + "\n")

    def partition(self, a, b):
        self.partitions.append((a, b))
        self.apply_filter()

    def heal(self):
        self.partitions.clear()
        self.apply_filter()

    def policy_counters(self):
        """(TCP packets between workers on the rank ports, TCP packets the policy dropped) since
        the filter was last applied."""
        out = run("ip", "netns", "exec", self.switch, "nft", "list", "chain", "bridge", "mapd", "forward").stdout
        counts = [int(n) for n in re.findall(r"counter packets (\d+)", out)]
        return counts[0], counts[-1]

    def start_proxy(self):
        """The delay proxy on the coordinator's host, in front of mapd; workers started after this
        reach mapd through it."""
        h = self.coordinator
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_proxy.py")
        self.proxy = subprocess.Popen(h.exec_args("/usr/bin/python3", script, "--listen", f"{h.address}:{PROXY_PORT}", "--to",
                                                  f"{h.address}:{MAPD_PORT}"),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        if self.proxy.stdout.readline().strip() != "listening":
            raise RuntimeError("the delay proxy did not start")

    def slow(self, h, seconds):
        """Every byte between host `h` and mapd arrives `seconds` late (0: as fast as it can)."""
        self.proxy.stdin.write(f"delay {h.address} {seconds}\n")
        self.proxy.stdin.flush()

    # --- disks ---------------------------------------------------------------------------------
    def work_dir(self, h):
        return os.path.join(self.workdir, h.name)

    def mount_disk(self, path, size_bytes):
        """`path` (a worker's work directory, before its worker starts; the shared checkpoint
        storage) on a tmpfs of `size_bytes` of its own."""
        os.makedirs(path, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", path)
        self.disks.append(path)

    def fill_disk(self, path):
        """Fills the disk under `path` (mount_disk) to the last byte."""
        with open(os.path.join(path, FILLER), "wb", buffering=0) as f:  # unbuffered: a write finding no room raises at once
            st = os.statvfs(path)
            with contextlib.suppress(OSError):  # the bulk at once (writing it would take a second or more)
                os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)
            chunk = b"\0" * (1 << 20)
            with contextlib.suppress(OSError):  # ENOSPC: full (the write before it wrote what fitted)
                f.seek(0, os.SEEK_END)
                while True:
                    f.write(chunk)

    def free_disk(self, path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, FILLER))

    # --- the daemons ---------------------------------------------------------------------------
    def start_mapd(self, *flags):
        h = self.coordinator
        h.log_path = os.path.join(self.workdir, "mapd.log")
        log = open(h.log_path, "a")
        args = h.exec_args(self.binaries["mapd"], "--listen", f"{h.address}:{MAPD_PORT}", "--metrics-listen",
                           f"{h.address}:{MAPD_METRICS_PORT}", "--store", os.path.join(self.workdir, "jobs.db"), *flags)
        h.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
                                  env=dict(os.environ, MAPD_TOKEN=self.token, MAPD_WORKER_TOKEN=self.worker_token))
        line = h.proc.stdout.readline()
        if "serving on port" not in line:
            raise RuntimeError(f"mapd did not start: {line}{open(h.log_path).read()}")
        return h.proc

    def start_worker(self, h, *flags, cpu_devices=1):
        h.log_path = os.path.join(self.workdir, f"{h.name}.log")
        log = open(h.log_path, "a")
        port = PROXY_PORT if self.proxy else MAPD_PORT
        args = h.exec_args(self.binaries["mapd-worker"], "--coordinator", f"{self.coordinator.address}:{port}",
                           "--advertise-host", h.address, "--metrics-listen", f"{h.address}:{WORKER_METRICS_PORT}",
                           "--rank-ports", f"{RANK_PORTS[0]}-{RANK_PORTS[1]}", "--cpu-devices", str(cpu_devices),
                           "--memory-per-device", str(1 << 30), "--hostname", h.name,
                           "--work-dir", self.work_dir(h), *flags, private_shm=True)
        h.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                  env=dict(os.environ, MAPD_WORKER_TOKEN=self.worker_token, MAPD_CALIBRATION="off"))
        return h.proc

    def wait_registered(self, count, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            alive = [w for w in self.list_workers() if w["state"] == "ALIVE"]
            if len(alive) >= count:
                return alive
            time.sleep(0.2)
        raise AssertionError(f"{count} workers did not register: {self.list_workers()}")

    def mapctl(self, *args, check=True, timeout=120):
        """mapctl run on the coordinator's host against its mapd."""
        env = dict(os.environ, MAPD_ADDRESS=f"{self.coordinator.address}:{MAPD_PORT}", MAPD_TOKEN=self.token)
        r = subprocess.run(self.coordinator.exec_args(self.binaries["mapctl"], *args), capture_output=True, text=True,
                           env=env, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"mapctl {' '.join(args)}: exit {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def list_workers(self):
        import json
        return json.loads(self.mapctl("workers", "-o", "json").stdout)

    def signal(self, h, sig):
        """`sig` to a host's daemon alone (a paused mapd-worker's ranks are processes of their own
        and go on). The daemon is `ip netns exec … [sh -c 'exec …']`: one pid throughout."""
        if h.proc and h.proc.poll() is None:
            os.kill(h.proc.pid, sig)

    def rank_pids(self, h):
        """The mapd-rank processes on a host."""
        out = []
        for pid in h.pids():
            with contextlib.suppress(OSError):
                if os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "mapd-rank":
                    out.append(pid)
        return out

    # --- teardown ------------------------------------------------------------------------------
    def stop_daemons(self):
        for h in self.hosts:
            if h.proc and h.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(h.proc.pid, signal.SIGCONT)
                    h.proc.send_signal(signal.SIGTERM)
        for h in self.hosts:
            if h.proc:
                try:
                    h.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
                    h.proc.wait()

    def orphans(self):
        """Processes left in the cluster's namespaces once every daemon has exited."""
        return {h.name: h.pids() for h in self.hosts if h.pids()}

    def down_network(self):
        """Deletes every namespace of this tag's (a crashed earlier run's too), killing what runs there."""
        names = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
        for name in [n for n in names if n.startswith(self.prefix + "-")]:
            for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            run("ip", "netns", "del", name, check=False)

    def down(self):
        self.stop_daemons()
        if self.proxy:
            self.proxy.stdin.close()
            try:
                self.proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait()
            self.proxy = None
        left = self.orphans()
        self.down_network()
        for d in self.disks:
            run("umount", "-l", d, check=False)
        self.disks.clear()
        return left
