"""mapctl's job commands as kubectl users expect them, against a real mapd and mapd-worker: a
rank's output followed with `logs -f --rank`, `describe` saying why a job waits, `-o yaml`
submitted again with `submit -f`, flags over the file, field-named job-file errors, "did you
mean", numeric flags that say what to give, job names (job/10) taken for ids, `delete`, JSON numbers and RFC 3339 times, a config file's contexts and `--token-file`,
shell completion, and `watch` carrying on across a coordinator restart."""
import json
import os
import re
import subprocess
import threading
import time

from test_jobs import GPT, MAPD_WORKER, TOKEN, coordinator, mapctl, start_mapd, start_worker, stop, stop_all, wait_for_step  # noqa: F401
from conftest import MAPCTL


def test_logs_follow_a_ranks_output_and_describe_says_why_a_job_waits(tmp_path):
    proc, port = start_mapd(tmp_path / "jobs.db", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, "alpha")]  # 2 CPU devices
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "400", check=0)
        # Rank 1's output, followed: lines come while the job runs, and the command ends with it.
        follow = subprocess.Popen([MAPCTL, "logs", "1", "-f", "--rank", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=dict(os.environ, **env))
        first = follow.stdout.readline()
        assert first.startswith("[rank 1] of 2 ranks: steps 1 to 400"), first + follow.stderr.read()
        second = follow.stdout.readline()
        assert second.startswith("[rank 1] step 1/400 loss "), second
        state = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)["state"]
        assert state in ("RUNNING", "PLANNING", "PENDING"), state  # followed live, not read afterwards
        rest = follow.stdout.read()  # to the end: the command ends with the job (communicate() would skip what readline buffered)
        assert follow.wait(timeout=60) == 0, follow.stderr.read()
        steps = [int(m) for m in re.findall(r"^\[rank 1\] step (\d+)/400 ", second + rest, re.M)]
        assert steps == list(range(1, 401)), steps[:5]
        assert json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)["state"] == "SUCCEEDED"
        # --tail, and the worker's own copy of the output.
        assert mapctl(env, "logs", "1", "--rank", "0", "--tail", "1", check=0).stdout.startswith("[rank 0] checkpoint step 400 written")
        assert "[rank 0] step 400/400" in (tmp_path / "alpha" / "job-1" / "rank_0.log").read_text()
        bad = mapctl(env, "logs", "1", "--rank", "2")
        assert bad.returncode == 1 and "rank 2: job 1 has ranks 0..1" in bad.stderr, bad.stderr
        # The events: progress sampled by default, every step on asking.
        events = mapctl(env, "logs", "1", check=0).stdout
        assert "progress events left out; --all-steps shows every one" in events, events
        assert len(events.splitlines()) < 60 and "step 400/400" in events, events
        assert len(mapctl(env, "logs", "1", "--all-steps", check=0).stdout.splitlines()) > 400

        # A job that cannot be placed waits; describe says why.
        mapctl(env, "submit", GPT, "--ranks", "4", "--steps", "5", check=0)
        deadline = time.time() + 20
        # (the submission's own note stands there until the dispatcher has looked at the job)
        while "Waiting:    waiting for" not in (described := mapctl(env, "describe", "2", check=0).stdout) and time.time() < deadline:
            time.sleep(0.2)
        assert re.search(r"^State: +PENDING", described, re.M), described
        assert re.search(r"^Waiting: +waiting for 4 free cpu device\(s\); 2 free on ALIVE workers now", described, re.M), described
        assert "#1   PENDING    submitted:" in described, described
        as_yaml = mapctl(env, "describe", "2", "-o", "json", check=0).stdout
        assert json.loads(as_yaml)["waiting_reason"].startswith("waiting for 4 free cpu device(s)")
        # jobs --state: only those, any case; a wrong name lists the right ones.
        assert mapctl(env, "jobs", "--state", "succeeded", "-o", "name", check=0).stdout.split() == ["job/1"]
        assert mapctl(env, "jobs", "--state", "PENDING,Succeeded", "-o", "name", check=0).stdout.split() == ["job/1", "job/2"]
        bad = mapctl(env, "jobs", "--state", "DONE")
        assert bad.returncode == 1 and "--state DONE: not a job state; give PENDING, PLANNING, RUNNING" in bad.stderr, bad.stderr
        # delete: refused while the job is not finished, then the job is gone.
        refused = mapctl(env, "delete", "2")
        assert refused.returncode == 1 and "job 2 is PENDING: cancel it first (mapctl cancel 2)" in refused.stderr, refused.stderr
        mapctl(env, "cancel", "2", check=0)
        assert mapctl(env, "delete", "2", "-o", "name", check=0).stdout == "job/2\n"
        assert [j["id"] for j in json.loads(mapctl(env, "jobs", "-o", "json", check=0).stdout)] == [1]
        # submit --wait follows the job to its end and exits with its outcome, as watch does.
        waited = mapctl(env, "submit", GPT, "--steps", "3", "--wait")
        assert waited.returncode == 0 and waited.stdout.startswith("submitted job 3") and "SUCCEEDED" in waited.stdout, waited.stdout + waited.stderr
        assert "trained 3 steps" in waited.stdout, waited.stdout
        # jobs -w: the list, then a line for each job that appears or changes, until interrupted.
        watching = subprocess.Popen([MAPCTL, "jobs", "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=dict(os.environ, **env))
        header = watching.stdout.readline()
        assert header.split()[:3] == ["ID", "NAME", "STATE"], header + watching.stderr.read()
        assert [watching.stdout.readline().split()[0] for _ in range(2)] == ["1", "3"]
        # submit --follow: its events and rank 0's output as they come; exit with its outcome.
        followed = mapctl(env, "submit", GPT, "--steps", "3", "--follow")
        assert followed.returncode == 0 and followed.stdout.startswith("submitted job 4"), followed.stdout + followed.stderr
        out = followed.stdout
        assert "[rank 0] step 3/3 loss " in out and "trained 3 steps" in out and "SUCCEEDED" in out, out
        assert out.index("[rank 0] step 1/3 ") < out.index("[rank 0] step 3/3 "), out
        # Job 4 appeared and ran while -w watched: its rows, to SUCCEEDED.
        rows = []
        stop_watching = threading.Timer(30, watching.kill)  # readline returns '' then
        stop_watching.start()
        while not any(r.split()[:1] == ["4"] and "SUCCEEDED" in r for r in rows):
            row = watching.stdout.readline()
            if not row:
                break
            rows.append(row)
        stop_watching.cancel()
        watching.kill()
        watching.wait(timeout=10)
        job4 = [r.split()[2] for r in rows if r.split()[:1] == ["4"]]
        assert job4 and job4[-1] == "SUCCEEDED", rows
        both = mapctl(env, "submit", GPT, "--steps", "3", "--wait", "--follow")
        assert both.returncode == 2 and "excludes" in both.stderr, both.stderr
    finally:
        stop_all(proc, workers)


def test_yaml_round_trips_through_submit_and_flags_win_over_the_file(coordinator):
    tmp, env = coordinator
    mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "7", "--lr", "0.002", "--mesh", "2", "--zero", "1", check=0)
    printed = mapctl(env, "get", "1", "-o", "yaml", check=0).stdout
    got = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)
    # Integers are JSON numbers, times RFC 3339.
    assert isinstance(got["id"], int) and got["spec"]["training"]["steps"] == 7 and got["spec"]["mesh"] == [2], got
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", got["created_time"]) and "created_unix_seconds" not in got, got
    (tmp / "job.yaml").write_text(printed)
    assert mapctl(env, "submit", "-f", str(tmp / "job.yaml"), "-o", "name", check=0).stdout == "job/2\n"
    again = json.loads(mapctl(env, "get", "2", "-o", "json", check=0).stdout)
    assert again["spec"] == got["spec"], (again["spec"], got["spec"])
    # A flag typed on the command line wins over the file's field; the rest is the file's.
    mapctl(env, "submit", "-f", str(tmp / "job.yaml"), "--steps", "3", check=0)
    third = json.loads(mapctl(env, "get", "3", "-o", "json", check=0).stdout)["spec"]
    assert third["training"]["steps"] == 3 and third["training"]["lr"] == 0.002 and third["zero"] == "1" and third["ranks"] == 2, third
    # Job files: sizes and shapes as the flags take them, field-named errors.
    (tmp / "ok.yaml").write_text(f"model: {GPT}\nsteps: 2\nranks: 2\nmesh: 2\nmemory_per_device: 2GiB\nzero: 2\n")
    mapctl(env, "submit", "-f", str(tmp / "ok.yaml"), check=0)
    fourth = json.loads(mapctl(env, "get", "4", "-o", "json", check=0).stdout)["spec"]
    assert fourth["memory_per_device"] == 2 << 30 and fourth["zero"] == "2" and fourth["mesh"] == [2], fourth
    for text, words in [("steps: ten\n", 'steps): invalid value "ten" for type TYPE_INT64'),
                        ("stepz: 3\n", "stepz: unknown field; did you mean 'steps'?"),
                        ("mesh: 2y2\n", "mesh: "),
                        ("memory_per_device: lots\n", "memory_per_device: "),
                        ("mesh: {a: 1}\n", "mesh: give a list")]:
        (tmp / "bad.yaml").write_text(f"model: {GPT}\n{text}")
        bad = mapctl(env, "submit", "-f", str(tmp / "bad.yaml"))
        assert bad.returncode == 1 and f"-f {tmp / 'bad.yaml'}: " in bad.stderr and words in bad.stderr, (text, bad.stderr)
    # A malformed --elastic is refused before anything is sent.
    bad = mapctl(env, "submit", GPT, "--ranks", "2", "--elastic", "3:2")
    assert bad.returncode == 1 and "--elastic '3:2': give MIN or MIN:MAX devices" in bad.stderr, bad.stderr
    # Output formats.
    names = mapctl(env, "jobs", "-o", "name", check=0).stdout.split()
    assert names == ["job/1", "job/2", "job/3", "job/4"], names
    # A name as `jobs -o name` prints it is taken wherever an id is (kubectl's habit).
    assert json.loads(mapctl(env, "get", names[1], "-o", "json", check=0).stdout)["id"] == 2
    first_event = mapctl(env, "logs", "1", check=0).stdout.splitlines()[0]
    assert "submitted" in first_event and mapctl(env, "logs", "job/1", check=0).stdout.splitlines()[0] == first_event, first_event
    for wrong in ("job/x", "0", "job/-3", "jobs/1"):
        bad = mapctl(env, "get", wrong)
        assert bad.returncode == 2 and f"'{wrong}' is not a job: give its id (10) or name (job/10)" in bad.stderr, (wrong, bad.stderr)
    wide = mapctl(env, "jobs", "-o", "wide", check=0).stdout.splitlines()
    assert wide[0].split()[:7] == ["ID", "NAME", "STATE", "STEP", "LOSS", "RANKS", "AGE"] and "PLAN" in wide[0], wide
    assert re.search(r"\s\d+s\s", wide[1]), wide[1]  # AGE in seconds
    import yaml
    assert [j["id"] for j in yaml.safe_load(mapctl(env, "jobs", "-o", "yaml", check=0).stdout)] == [1, 2, 3, 4]
    # An elastic policy from a file reaches the coordinator, which admits it without shared
    # checkpoint storage too (peer workers keep its shards).
    (tmp / "elastic.yaml").write_text(f"model: {GPT}\nranks: 2\ncheckpoint_every: 5\nelastic: {{min_devices: 1, max_devices: 2}}\n")
    mapctl(env, "submit", "-f", str(tmp / "elastic.yaml"), check=0)
    spec = json.loads(mapctl(env, "get", "5", "-o", "json", check=0).stdout)["spec"]
    assert spec["elastic"] == {"min_devices": 1, "max_devices": 2}, spec


def test_mistyped_commands_and_flags_get_a_suggestion(coordinator):
    _, env = coordinator
    r = mapctl(env, "submt", GPT)
    assert r.returncode == 2 and "mapctl: unknown command 'submt'; did you mean 'submit'?" in r.stderr, r.stderr
    r = mapctl(env, "logs", "1", "--rnak", "1")
    assert r.returncode == 2 and "unknown flag --rnak for logs; did you mean --rank?" in r.stderr, r.stderr
    r = mapctl(env, "frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate' (commands: " in r.stderr and "did you mean" not in r.stderr, r.stderr
    # Numeric flags say what to give (not CLI11's range up to DBL_MAX's 300 digits).
    for args, words in [(("plan", GPT, "--devices", "0"), "--devices: must be at least 1, not 0"),
                        (("submit", GPT, "--steps", "0"), "--steps: must be at least 1, not 0"),
                        (("submit", GPT, "--lr", "0"), "--lr: must be greater than 0, not 0"),
                        (("submit", GPT, "--checkpoint-every", "-5"), "--checkpoint-every: must be 0 or more, not -5")]:
        r = mapctl(env, *args)
        assert r.returncode == 2 and words in r.stderr and "179769" not in r.stderr, (args, r.stderr)
    for binary in (MAPCTL, os.environ["MAPD"], MAPD_WORKER):
        out = subprocess.run([binary, "--version"], capture_output=True, text=True)
        assert out.returncode == 0 and re.match(r"^(mapctl|mapd|mapd-worker) \d+\.\d+\.\d+ \(revision \S+\)$", out.stdout.strip()), out
    script = mapctl(env, "completion", "bash", check=0).stdout
    done = subprocess.run(["bash", "-c", script + "\ncomplete -p mapctl\nCOMP_WORDS=(mapctl sub); COMP_CWORD=1; _mapctl_complete; echo ${COMPREPLY[@]}\n"
                           "COMP_WORDS=(mapctl logs 1 --ra); COMP_CWORD=3; _mapctl_complete; echo ${COMPREPLY[@]}"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.splitlines()[1:] == ["submit", "--rank"], done.stdout + done.stderr


def test_a_config_files_context_and_a_token_file_connect(coordinator):
    tmp, env = coordinator
    (tmp / "token").write_text(TOKEN + "\n")
    (tmp / "config.yaml").write_text(f"current-context: lab\ncontexts:\n  lab:\n    address: {env['MAPD_ADDRESS']}\n    token_file: token\n"
                                     "  nowhere:\n    address: 127.0.0.1:1\n    token_file: token\n")
    bare = {"MAPD_CONFIG": str(tmp / "config.yaml"), "MAPD_ADDRESS": "", "MAPD_TOKEN": ""}
    assert mapctl(bare, "jobs", "-o", "json", check=0).stdout.strip() == "[]"
    r = mapctl(bare, "jobs", "--context", "nowhere")
    assert r.returncode == 1 and "cannot reach the coordinator" in r.stderr, r.stderr
    r = mapctl(bare, "jobs", "--context", "nope")
    assert r.returncode == 1 and "no context 'nope' (contexts: lab, nowhere)" in r.stderr, r.stderr
    # --token-file and --address over the context.
    (tmp / "wrong").write_text("not-the-token\n")
    r = mapctl(bare, "jobs", "--token-file", str(tmp / "wrong"))
    assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr, r.stderr
    no_config = {"MAPD_CONFIG": str(tmp / "none.yaml"), "MAPD_TOKEN": ""}
    r = mapctl(dict(env, **no_config), "jobs")
    assert r.returncode == 1 and "no token: give --token-file FILE" in r.stderr, r.stderr
    assert mapctl(dict(env, **no_config), "jobs", "--token-file", str(tmp / "token"), "-o", "json", check=0).stdout.strip() == "[]"


def test_watch_carries_on_when_the_coordinator_restarts(tmp_path):
    # Shared checkpoint storage: the restarted coordinator resumes the job from its last checkpoint.
    flags = ("--heartbeat-seconds", "0.25", "--lease-seconds", "5", "--checkpoint-dir", str(tmp_path / "checkpoints"))
    proc, port = start_mapd(tmp_path / "jobs.db", *flags)
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, "alpha")]
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3000", "--checkpoint-every", "50", "-o", "json", check=0)
        wait_for_step(env, 1, 120)  # a checkpoint committed to resume from
        watch = subprocess.Popen([MAPCTL, "watch", "1", "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, **env))
        first = watch.stdout.readline()  # the watch is following (mapctl takes a moment to start)
        assert json.loads(first)["seq"] == 1, first
        stop(proc)  # the coordinator goes away mid-job and comes back on the same port and store
        time.sleep(1)
        proc, _ = start_mapd(tmp_path / "jobs.db", *flags, listen=f"127.0.0.1:{port}")
        out = first + watch.stdout.read()
        err = watch.stderr.read()
        watch.wait(timeout=60)
        assert watch.returncode == 0, mapctl(env, "describe", "1").stdout + err[-1000:]
        assert "lost the coordinator" in err and "following job 1 again from event #" in err, err
        seqs = [json.loads(line)["seq"] for line in out.splitlines()]
        assert seqs == sorted(set(seqs)), seqs  # no event twice, in order
        events = [json.loads(line) for line in out.splitlines()]
        assert events[-1]["state"] == "SUCCEEDED", events[-1]
        assert any(e["state"] == "RESTARTING" or "resum" in e.get("message", "") for e in events), [e.get("message") for e in events]
    finally:
        stop_all(proc, workers)
