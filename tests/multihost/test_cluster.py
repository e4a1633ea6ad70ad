"""MAP across hosts (issue 50), on a cluster of network namespaces made by cluster.py: a coordinator
host and four worker hosts on a bridge, the manifests' network policy on the switch."""
import json
import os
import re
import subprocess

import pytest

import cluster as cl

MLP = "mlp:in=8,hidden=16,layers=2,out=4,batch=8"
STEPS = 12

pytestmark = pytest.mark.skipif(cl.available() is not None, reason=str(cl.available()))


@pytest.fixture()
def cluster(tmp_path):
    c = cl.Cluster(tmp_path / "cluster")
    c.up()
    yield c
    left = c.down()
    assert left == {}, f"processes left in the cluster's namespaces: {left}"


def job(c, job_id):
    return json.loads(c.mapctl("get", str(job_id), "-o", "json").stdout)


def losses_of(c, job_id):
    """Each step's loss as the job's events last recorded it (a resumed step: its repeat)."""
    events = json.loads(c.mapctl("logs", str(job_id), "-o", "json").stdout)
    return {int(e["step"]): e["loss"] for e in events if int(e.get("step", 0)) > 0}, [e["message"] for e in events]


def one_process_losses(steps):
    r = subprocess.run([os.environ["MAPCTL"], "run", MLP, "--steps", str(steps), "-o", "json"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, MAPD_CALIBRATION="off"))
    assert r.returncode == 0, r.stdout + r.stderr
    return {int(s["step"]): s["loss"] for s in json.loads(r.stdout)["steps"]}


def test_a_job_runs_across_four_hosts_with_gloo_between_them_and_equals_one_process(cluster):
    """Bar item 5: each rank on a host of its own, meeting through rank 0's store gate and talking
    Gloo over the bridge, within the rank ports the policy opens; its losses are one process's."""
    cluster.start_mapd("--heartbeat-seconds", "0.25", "--lease-seconds", "3")
    for w in cluster.workers:
        cluster.start_worker(w)
    cluster.wait_registered(4)
    cluster.mapctl("submit", MLP, "--ranks", "4", "--steps", str(STEPS))
    watched = cluster.mapctl("watch", "1", check=False, timeout=300)
    assert watched.returncode == 0, watched.stdout + watched.stderr + open(cluster.coordinator.log_path).read()
    losses, messages = losses_of(cluster, 1)
    assert any("running on w-1 (rank 0), w-2 (rank 1), w-3 (rank 2), w-4 (rank 3)" in m for m in messages), messages
    reference = one_process_losses(STEPS)
    assert sorted(losses) == sorted(reference) == list(range(1, STEPS + 1)), (losses, reference)
    for step, loss in losses.items():
        assert abs(loss - reference[step]) <= 1e-5 * abs(reference[step]), (step, loss, reference[step])
    # The ranks' traffic crossed the bridge between workers on the rank ports, and nothing of
    # MAP's tried a port the policy does not open.
    between_workers, dropped = cluster.policy_counters()
    assert between_workers > 100, between_workers
    assert dropped == 0, f"{dropped} TCP packets dropped by the network policy"
    # rank 0's store was reached through its gate, on its worker's address, in the rank ports.
    log = open(cluster.coordinator.log_path).read()
    worker, gate = re.search(r"kind=rendezvous worker=(\S+) job=1 attempt=0 store=(\S+)", log).groups()
    hostname = next(w["hostname"] for w in cluster.list_workers() if w["id"] == worker)
    host, port = gate.rsplit(":", 1)
    assert host == next(h.address for h in cluster.workers if h.name == hostname), (gate, hostname)
    assert cl.RANK_PORTS[0] <= int(port) <= cl.RANK_PORTS[1], gate


def test_each_fault_kind_on_a_seeded_schedule_breaks_no_invariant(cluster):
    """Bar item 1's short form: one round of each fault kind (faults.py) against jobs running on
    four worker hosts with shared checkpoint storage; every invariant holds after each."""
    import faults
    rounds = faults.Rounds(cluster, seed=50, steps=200, checkpoint_every=20)
    rounds.start()
    violations = []
    for number, kind in enumerate(faults.FAULT_KINDS, 1):
        violations += [f"round {number} ({kind}): {v}" for v in rounds.round(number, kind)]
    print(rounds.table())
    assert violations == [], "\n".join(violations)
    # Each fault that always stops the job's ranks was detected and recovered from. A slow link
    # restarts the job only when its delay passes the lease, a full disk only when a checkpoint is
    # written while it is full: the long form's table says how often.
    always = {"kill_worker", "pause_host", "partition_coordinator", "kill_coordinator", "partition_workers"}
    assert all(cost[1] is not None for cost in rounds.costs if cost[0] in always), rounds.costs


def test_without_shared_storage_a_killed_workers_job_resumes_from_its_peers_copies(cluster):
    """Bar item 2 across hosts: mapd without --checkpoint-dir; the mapd-worker of a host running a
    4-rank job is killed; the job resumes on the hosts left from the shards peer workers kept (the
    new worker fetching them over the bridge) and succeeds, every invariant holding — a step run
    again has the loss it had (1e-5)."""
    import faults
    rounds = faults.Rounds(cluster, seed=51, steps=200, checkpoint_every=20, storage="peers", kinds=("kill_worker",))
    rounds.start()
    violations = rounds.round(1, "kill_worker", ranks=4)
    assert violations == [], "\n".join(violations)
    job = rounds.last_job
    messages = [e["message"] for e in rounds.events(job)]
    assert rounds.get(job)["state"] == "SUCCEEDED", messages[-5:]
    assert any("whose shards the workers left keep" in m for m in messages), messages
    assert rounds.costs[0][1] is not None, rounds.costs
    print(rounds.table())


def test_the_harness_catches_a_worker_without_fencing(tmp_path):
    """Bar item 1: a deliberately broken worker (mapd-worker-unfenced: fencing compiled out) keeps
    the ranks of the registration the coordinator ended when its host was paused; the round finds
    two live incarnations of the job's ranks — the paused host's and the restarted attempt's."""
    import faults
    binaries = {"mapd": os.environ["MAPD"], "mapd-worker": os.environ["MAPD_WORKER_UNFENCED"], "mapctl": os.environ["MAPCTL"]}
    c = cl.Cluster(tmp_path / "cluster", binaries=binaries)
    c.up()
    try:
        # Steps enough that the paused host's ranks are still training when the round looks.
        rounds = faults.Rounds(c, seed=50, steps=3000, checkpoint_every=200, kinds=("pause_host",))
        rounds.start()
        violations = rounds.round(1, "pause_host", ranks=2)  # both ranks on the paused host
    finally:
        c.down()
    assert any("live incarnations" in v for v in violations), violations
