"""Faults on a seeded schedule against jobs running on a Cluster (cluster.py), the history checked
against invariants after every round (issue 50) — as etcd's robustness tests check theirs.

A round: submit a job (and sometimes a second one that is cancelled at once), wait until it is
past a step drawn from the seed, inject one fault on a host that runs its ranks — kill its worker,
pause the host, cut it off from the coordinator or from another host of the job, slow its link to
the coordinator (delay_proxy.py), fill the disk under its checkpoints, or kill the coordinator —
recover (restart what was killed, resume what was paused, heal the partition, lift the delay,
free the disk), wait for the job's end, then check:
  acknowledged   every job a submit acknowledged is listed; every acknowledged cancel is CANCELLED
  transitions    a job's events are numbered 1..n without a gap, its states move only along the
                 model's edges, nothing follows a finished state, SUCCEEDED only after the last step
  checkpoints    committed steps only move forward within an attempt; a resume names a committed
                 step no older than the last one committed before it, whose directory holds every
                 rank's shard and its metadata (never a partial checkpoint)
  losses         a step trained again after a resume has the loss it had before (1e-5)
  incarnations   at most one live mapd-rank process per (job, rank) across all hosts, sampled
                 once the fault is recovered and settled (a paused host's ranks are fenced)
  orphans        no mapd-rank process left anywhere once the job has ended
Each round also measures what the fault cost: seconds to detect it, to re-plan (the job placed
again), to restore and train again (the first new step), and the steps lost.

A failing seed is replayable: `faults.py --seed S --rounds N` draws the same schedule.
`--storage peers` runs mapd without shared checkpoint storage: each worker's shards are kept by a
peer worker (docs/coordinator.md "Checkpoints without shared storage"); a coordinator restart
then fails running jobs (not built), so that kind is not drawn.
"""
import glob
import argparse
import json
import os
import random
import re
import signal
import sys
import tempfile
import time

import cluster as cl

FAULT_KINDS = ("kill_worker", "pause_host", "partition_coordinator", "kill_coordinator", "partition_workers", "slow_link",
               "full_disk")
PEER_FAULT_KINDS = tuple(k for k in FAULT_KINDS if k != "kill_coordinator")  # without shared storage
MODEL = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
LEASE, HEARTBEAT = 1.5, 0.25
# A rank waits this long in a collective (or silent) before it fails: a partition between workers
# lasts longer, so their ranks fail and the job restarts once it heals.
RANK_TIMEOUT = 8
# Each worker's work directory, and the shared checkpoint storage (twice it): a tmpfs this large
# (full_disk fills the one under the victim's checkpoints). A worker keeps each run directory it
# had, its last checkpoints in it (2.5 MiB a run here): 200 rounds without shared storage fill
# 650 MiB of the busiest worker's.
DISK_BYTES = 1 << 30
MAPD_FLAGS = ("--lease-seconds", str(LEASE), "--heartbeat-seconds", str(HEARTBEAT), "--max-restarts", "1000")
WORKER_FLAGS = ("--rank-timeout", str(RANK_TIMEOUT))

# The job state model (server/jobs/job_manager.cc's IsAllowedTransition, written out again here as
# the model the history is checked against): an event that does not change the state is no edge.
EDGES = {
    "PENDING": {"PLANNING", "FAILED", "CANCELLED"},
    "PLANNING": {"RUNNING", "PENDING", "FAILED", "CANCELLED"},
    "RUNNING": {"SUCCEEDED", "RESTARTING", "FAILED", "CANCELLED"},
    "RESTARTING": {"RUNNING", "FAILED", "CANCELLED"},
    "SUCCEEDED": set(), "FAILED": set(), "CANCELLED": set(),
}


class History:
    """What the harness was told: acknowledged submits and cancels."""

    def __init__(self):
        self.submitted, self.cancelled = [], []


class JobEnded(AssertionError):
    """The job succeeded before the step a fault was to be injected at (a loaded host)."""


def event_time(e):
    if "unix_seconds" in e:
        return float(e["unix_seconds"])
    from datetime import datetime
    return datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()


class Rounds:
    def __init__(self, c, seed, steps=200, checkpoint_every=20, log=print, storage="shared", kinds=None):
        self.c, self.rng, self.steps, self.every, self.log = c, random.Random(seed), steps, checkpoint_every, log
        self.job_steps = {}  # each job's steps (a round run again has a longer job)
        self.last_job = None  # the job the last round injected its fault into
        self.storage = storage
        self.kinds = kinds or (FAULT_KINDS if storage == "shared" else PEER_FAULT_KINDS)
        self.seed = seed
        self.history = History()
        self.costs = []  # (kind, detect_s, replan_s, restore_s, steps_lost)
        self.ckpt = os.path.join(c.workdir, "checkpoints")

    # --- the cluster ---------------------------------------------------------------------------
    def mapd_flags(self):
        return MAPD_FLAGS + (("--checkpoint-dir", self.ckpt) if self.storage == "shared" else ())

    def start(self):
        if self.storage == "shared":
            self.c.mount_disk(self.ckpt, 2 * DISK_BYTES)  # (full_disk)
        self.c.start_mapd(*self.mapd_flags())
        # The workers reach mapd through the delay proxy only when a slow link may be drawn: a
        # Python proxy on a loaded machine delays every report, and a round then reads a step the
        # ranks are long past (a worker killed "at step 72" once had finished the job).
        if "slow_link" in self.kinds:
            self.c.start_proxy()
        for w in self.c.workers:
            self.c.mount_disk(self.c.work_dir(w), DISK_BYTES)
            self.start_worker(w)
        self.c.wait_registered(len(self.c.workers))

    def start_worker(self, w):
        self.c.start_worker(w, *WORKER_FLAGS, cpu_devices=2)

    def host_of(self, worker_id):
        hostname = next(w["hostname"] for w in self.c.list_workers() if w["id"] == worker_id)
        return next(h for h in self.c.workers if h.name == hostname)

    def placement(self, messages):
        """The hosts of the job's latest placement, rank 0's first."""
        placed = [m for m in messages if m.startswith("running on ") or m.startswith("resumed from ")]
        ids = re.findall(r"(w-\d+) \(rank", placed[-1]) if placed else []
        return [self.host_of(i) for i in ids]

    def events(self, job):
        return json.loads(self.c.mapctl("logs", str(job), "-o", "json").stdout)

    def get(self, job):
        return json.loads(self.c.mapctl("get", str(job), "-o", "json").stdout)

    def submit(self, ranks, steps=None):
        steps = steps or self.steps
        out = json.loads(self.c.mapctl("submit", MODEL, "--ranks", str(ranks), "--steps", str(steps), "--checkpoint-every",
                                       str(self.every), "-o", "json").stdout)
        self.history.submitted.append(int(out["id"]))
        self.job_steps[int(out["id"])] = steps
        return int(out["id"])

    def wait_step(self, job, step, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.get(job)
            if int(got.get("step", 0)) >= step and got["state"] == "RUNNING":
                return int(got["step"])
            if got["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                raise (JobEnded if got["state"] == "SUCCEEDED" else AssertionError)(
                    f"job {job} ended {got['state']} before step {step}: {got.get('error', '')}")
            time.sleep(0.05)
        raise AssertionError(f"job {job} did not reach step {step}")

    def wait_end(self, job, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.get(job)
            if got["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return got
            time.sleep(0.2)
        raise AssertionError(f"job {job} did not end within {timeout} s: {self.get(job)}")

    # --- faults --------------------------------------------------------------------------------
    def inject(self, kind, victim, job, hosts):
        """Injects `kind` on `victim` (a worker host running `job`'s ranks; `hosts`: all that run
        them) and recovers from it; returns when the cluster is whole again."""
        c = self.c
        self.fault_at = time.time()
        if kind == "kill_worker":
            c.signal(victim, signal.SIGKILL)
            victim.proc.wait()
            time.sleep(LEASE + 0.5)
            self.start_worker(victim)
        elif kind == "pause_host":  # every process of the host: a paused VM
            pids = victim.pids()
            for p in pids:
                os.kill(p, signal.SIGSTOP)
            time.sleep(LEASE + 1.5)
            for p in pids:
                os.kill(p, signal.SIGCONT)
        elif kind == "partition_coordinator":
            c.partition(victim, c.coordinator)
            time.sleep(LEASE + 1.5)
            c.heal()
        elif kind == "partition_workers":  # from another host of the job (any other worker, if none)
            others = [h for h in hosts if h is not victim] or [w for w in c.workers if w is not victim]
            c.partition(victim, self.rng.choice(others))
            time.sleep(RANK_TIMEOUT + 2)  # past the ranks' wait in their collectives
            c.heal()
        elif kind == "slow_link":  # victim <-> mapd, around the lease: lost, or only late
            c.slow(victim, round(self.rng.uniform(0.3, 2 * LEASE), 2))
            time.sleep(LEASE + 1.5)
            c.slow(victim, 0)
        elif kind == "full_disk":  # under its checkpoints: the shared storage, or its work directory
            disk = self.ckpt if self.storage == "shared" else c.work_dir(victim)
            c.fill_disk(disk)
            time.sleep(LEASE + 1.5)
            c.free_disk(disk)
        elif kind == "kill_coordinator":  # as the job reaches a checkpoint step: during its commit
            step = int(self.get(job).get("step", 0))
            self.wait_step(job, (step // self.every + 1) * self.every)
            self.fault_at = time.time()
            c.signal(c.coordinator, signal.SIGKILL)
            c.coordinator.proc.wait()
            c.start_mapd(*self.mapd_flags())
        else:
            raise ValueError(kind)

    # --- a round -------------------------------------------------------------------------------
    def round(self, number, kind=None, ranks=None):
        kind = kind or self.rng.choice(self.kinds)
        ranks = ranks or self.rng.choice((2, 4))
        if kind == "partition_workers":
            ranks = 4  # on two hosts at least (2 devices each), so the partition cuts the job's links
        at = self.rng.randint(self.every + 1, self.steps // 2)
        steps = self.steps
        for attempt in range(3):
            job = self.submit(ranks, steps)
            if self.rng.random() < 0.3:  # an acknowledged cancel, to survive what follows
                extra = self.submit(2)
                self.c.mapctl("cancel", str(extra))
                self.history.cancelled.append(extra)
            try:
                reached = self.wait_step(job, at)
                hosts = self.placement([e["message"] for e in self.events(job)])
                victim = self.rng.choice(hosts)
                self.log(f"round {number}: {kind} on {victim.name} at step {reached} of job {job} ({ranks} ranks)")
                self.inject(kind, victim, job, hosts)
            except JobEnded:
                if attempt == 2:
                    raise
                self.fault_at = time.time()  # (never injected: the job is over)
            time.sleep(2 * HEARTBEAT + 1)  # settled: the fenced have had a heartbeat to notice
            violations = self.incarnations()
            got = self.wait_end(job)
            violations += self.check(job, got)
            if violations or attempt == 2 or not self.ended_before_fault(job):
                self.measure(kind, job, self.fault_at)
                self.last_job = job
                return violations
            # On a loaded host the harness's calls lag the job's steps: it reported a step far
            # behind the ranks', which finished before the fault landed — a round that tested
            # nothing. Again, with a job twice as long.
            steps *= 2
            self.log(f"round {number}: job {job} ended before the {kind} landed; again with {steps} steps")

    def ended_before_fault(self, job):
        events = self.events(job)
        return bool(events) and events[-1]["state"] == "SUCCEEDED" and event_time(events[-1]) < self.fault_at

    # --- invariants ----------------------------------------------------------------------------
    def rank_processes(self):
        """(job, rank, state) of every mapd-rank process on every host."""
        out = []
        for h in self.c.workers:
            for pid in self.c.rank_pids(h):
                try:
                    args = open(f"/proc/{pid}/cmdline").read().split("\0")
                    state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                run_dir = args[args.index("--run-dir") + 1]
                job = int(re.search(r"job-(\d+)", run_dir).group(1))
                out.append((job, int(args[args.index("--rank") + 1]), state, h.name))
        return out

    def incarnations(self):
        live = {}
        for job, rank, state, host in self.rank_processes():
            if state not in ("T", "t", "Z", "X"):
                live.setdefault((job, rank), []).append(host)
        return [f"job {j} rank {r}: {len(hosts)} live incarnations, on {hosts}" for (j, r), hosts in live.items() if len(hosts) > 1]

    def check(self, job, got):
        v = []
        listed = {int(j["id"]): j for j in json.loads(self.c.mapctl("jobs", "-o", "json").stdout)}
        v += [f"job {j}'s acknowledged submit is lost" for j in self.history.submitted if j not in listed]
        v += [f"job {j}'s acknowledged cancel is lost: {listed[j]['state']}" for j in self.history.cancelled
              if j in listed and listed[j]["state"] != "CANCELLED"]
        events = self.events(job)
        v += self.transitions(job, events)
        v += self.checkpoints(job, events)
        v += self.losses(job, events)
        deadline = time.time() + 15
        while self.rank_processes() and time.time() < deadline:
            time.sleep(0.2)
        left = [p for p in self.rank_processes() if p[0] == job]
        v += [f"job {job} ended {got['state']} and left rank processes: {left}"] if left else []
        if got["state"] != "SUCCEEDED":
            v.append(f"job {job} ended {got['state']}: {got.get('error', '')}")
        return v

    def transitions(self, job, events):
        v = []
        seqs = [int(e["seq"]) for e in events]
        if seqs != list(range(1, len(seqs) + 1)):
            v.append(f"job {job}'s events are not numbered 1..n: {seqs[:5]}…")
        states = [e["state"] for e in events]
        for a, b in zip(states, states[1:]):
            if a != b and b not in EDGES[a] or a == b and not EDGES[a]:
                v.append(f"job {job} moved {a} -> {b}")
        if states and states[-1] == "SUCCEEDED" and max(int(e.get("step", 0)) for e in events) != self.job_steps.get(job, self.steps):
            v.append(f"job {job} SUCCEEDED before its last step")
        return v

    def checkpoints(self, job, events):
        v, last = [], 0
        for e in events:
            m = e["message"]
            committed = re.search(r"checkpoint: step (\d+) committed", m)
            resumed = re.search(r"(?:restarting|resuming|resumed) from the checkpoint of step (\d+)", m)
            if committed:
                step = int(committed.group(1))
                if step < last:
                    v.append(f"job {job}: step {step} committed after step {last}")
                last = max(last, step)
            elif resumed:
                step = int(resumed.group(1))
                if step < last:
                    v.append(f"job {job} resumed from step {step}, older than step {last} committed before")
                v += self.complete(job, step)
        return v

    def complete(self, job, step):
        if self.storage == "shared":
            dirs = [os.path.join(self.ckpt, f"job-{job}", f"step-{step:08d}")]
        else:  # the resumed attempts' run directories on the workers, where they fetched it
            dirs = glob.glob(os.path.join(self.c.workdir, "*", f"job-{job}-*", "checkpoints", f"step-{step:08d}"))
        v = []
        for d in dirs:
            if not os.path.isdir(d):
                continue  # pruned since (kept: the newest few)
            files = os.listdir(d)
            if "meta.pb" not in files or not any(f.startswith("rank_") for f in files):
                v.append(f"job {job} resumed from {d}, which holds {sorted(files)}")
        return v

    def losses(self, job, events):
        seen, v = {}, []
        for e in events:
            s = int(e.get("step", 0))
            if s <= 0 or "loss" not in e:
                continue
            if s in seen and abs(seen[s] - e["loss"]) > 1e-5 * abs(seen[s]):
                v.append(f"job {job} step {s}: loss {e['loss']} after a resume, {seen[s]} before")
            seen.setdefault(s, e["loss"])
        return v

    # --- what it cost --------------------------------------------------------------------------
    def measure(self, kind, job, fault_at):
        events = self.events(job)
        after = [e for e in events if event_time(e) >= fault_at - 0.05]
        detected = next((e for e in after if e["state"] == "RESTARTING" or "lost" in e["message"]
                         or "coordinator restarted" in e["message"]), None)
        resumed = next((e for e in after if e["message"].startswith("resumed from")), None)
        if detected is None or resumed is None:
            self.costs.append((kind, None, None, None, None))
            return
        step = int(re.search(r"step (\d+)", resumed["message"]).group(1))
        # Steps lost: those trained past the checkpoint it resumed from, to be trained again.
        before = [int(e["step"]) for e in events if event_time(e) < event_time(resumed) and int(e.get("step", 0)) > 0]
        # (progress events past ~1,000 a job are sampled: the first recorded after the checkpoint)
        first = next((e for e in after if int(e.get("step", 0)) > step and event_time(e) >= event_time(resumed)), None)
        self.costs.append((kind, event_time(detected) - fault_at, event_time(resumed) - event_time(detected),
                           event_time(first) - event_time(resumed) if first else None, max(before, default=0) - step))

    def table(self):
        rows = ["| fault | rounds | restarted | detect (s) | re-plan (s) | restore + first step (s) | steps lost |",
                "|---|---|---|---|---|---|---|"]
        for kind in self.kinds:
            got = [c for c in self.costs if c[0] == kind]
            if not got:
                continue

            def median(i):
                xs = sorted(c[i] for c in got if c[i] is not None)
                return "–" if not xs else f"{xs[len(xs) // 2]:.2f}" if isinstance(xs[0], float) else str(xs[len(xs) // 2])
            restarted = sum(1 for c in got if c[1] is not None)
            rows.append(f"| {kind} | {len(got)} | {restarted} | {median(1)} | {median(2)} | {median(3)} | {median(4)} |")
        return "\n".join(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=200, help="each round's job")
    p.add_argument("--storage", choices=("shared", "peers"), default="shared",
                   help="checkpoints on mapd --checkpoint-dir, or each worker's kept by a peer worker")
    p.add_argument("--kinds", help="draw only these fault kinds (comma-separated; default: every kind the storage allows)")
    args = p.parse_args()
    why = cl.available()
    if why:
        sys.exit(f"faults.py: {why}")
    c = cl.Cluster(tempfile.mkdtemp(prefix="mapd-faults-"), workers=args.workers)
    c.up()
    rounds = Rounds(c, args.seed, steps=args.steps, storage=args.storage)
    if args.kinds:
        unknown = set(args.kinds.split(",")) - set(rounds.kinds)
        if unknown:
            c.down()
            sys.exit(f"faults.py: --kinds {','.join(sorted(unknown))}: not a fault kind of storage {args.storage}; "
                     f"choose from {','.join(rounds.kinds)}")
        rounds.kinds = tuple(args.kinds.split(","))  # (before start: the proxy only for slow_link)
    violations = []
    try:
        rounds.start()
        for n in range(1, args.rounds + 1):
            got = rounds.round(n)
            for x in got:
                print(f"  VIOLATION (seed {args.seed}, round {n}): {x}", flush=True)
            violations += got
    finally:
        left = c.down()
        if left:
            violations.append(f"processes left in the cluster's namespaces: {left}")
    print(rounds.table())
    print(f"{args.rounds} rounds, seed {args.seed}, storage {args.storage}: {len(violations)} invariant violation(s)")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
