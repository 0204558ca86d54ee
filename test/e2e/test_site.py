"""End to end into a site: the cluster plugs into what a site already runs, stood in by the bed
(scripts/testbed up --with-site): a directory (slapd with users alice, in group hpc, and bob, who
is not), the site's MariaDB, local PersistentVolumes, and a /home shared by the login and worker
pods. Users log in over SSH with keys from the directory, slurmdbd keeps its records in the
site's database, and slurmctld keeps its state on a volume.

Runs after test_slurm_cluster.py on the same bed (CTest orders them), with a cluster of its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from harness import (ENV, NODESET, NS, OPERATOR_NS, RELEASE, REPO, VALUES, cluster_state, controllers_up, get, helm,
                     drain_reason, health_report, install_operator, job_state, kubectl, leaked_secrets, login_pod, node_states,
                     nodeset_condition, privilege_findings, run, slurm, submit, wait_until, workers)

if "LDAP_URL" not in ENV:
    pytest.fail(f"bed {ENV.get('TESTBED_NAME')} has no site: scripts/testbed up --with-node --with-site",
                pytrace=False)

LOGINSET = f"{RELEASE}-login-slinky"
DB_SECRET = "site-db"  # the password the site's DBA handed over, where site-values expect it
HOME = Path(ENV["TESTBED_DIR"]) / "node" / "home"  # the site's shared /home
KEYS = Path(ENV["LDAP_USER_KEYS"])


def site_values(tmp: Path) -> Path:
    """The bed's own overlay (scripts/testbed site-values), with one worker."""
    values = json.loads(run(str(REPO / "scripts/testbed"), "--name", ENV["TESTBED_NAME"], "site-values").stdout)
    values["nodesets"]["slinky"]["replicas"] = 1
    path = tmp / "site.yaml"
    path.write_text(json.dumps(values))
    return path


def ssh(user: str, command: str, known_hosts: Path, check: bool = True,
        strict: str = "accept-new") -> subprocess.CompletedProcess:
    """`command` run by `user` logged in over SSH to the login Service, with the key the directory
    holds for them."""
    ip = get("service", LOGINSET)["spec"]["clusterIP"]
    return run("ssh", "-i", str(KEYS / user), "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={strict}",
               "-o", f"UserKnownHostsFile={known_hosts}", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
               f"{user}@{ip}", command, check=check, timeout=90)


@pytest.fixture(scope="module")
def known_hosts(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ssh") / "known_hosts"


def test_operator_installs_with_helm():
    install_operator()
    # A cluster an earlier file left behind when it failed would be upgraded, not replaced.
    helm("uninstall", RELEASE, "-n", NS, "--ignore-not-found", "--wait", "--timeout", "180s", timeout=200)
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120, check=False)


def site_namespace() -> None:
    """The namespace, with the database password the site's DBA handed over, and the site's /home."""
    kubectl("create", "namespace", NS, check=False)
    kubectl("-n", NS, "create", "secret", "generic", DB_SECRET,
            f"--from-literal=password={ENV['SITE_DB_PASSWORD']}", check=False)
    HOME.mkdir(parents=True, exist_ok=True)


def test_a_site_cluster_comes_up_on_the_sites_database_and_directory(tmp_path):
    site_namespace()
    helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(site_values(tmp_path)), timeout=120)

    wait_until("sinfo to show 1 idle worker", lambda: node_states() == {"slinky-0": "idle"}, 420,
               cluster_state, period=5)
    claim = get("pvc").get("items", [])
    assert [c["status"]["phase"] for c in claim] == ["Bound"], claim


def test_a_directory_user_logs_in_over_ssh_and_runs_jobs_as_themselves(known_hosts):
    def logged_in():
        r = ssh("alice", "id -u; id -gn; pwd; test -O . && echo owns-home", known_hosts, check=False)
        return r.stdout.split() if r.returncode == 0 else None

    # SSSD's first lookup and the login pod's readiness may lag the cluster's.
    assert wait_until("alice to log in", logged_in, 120, cluster_state) == \
        ["10001", "hpc", "/home/alice", "owns-home"]
    assert (HOME / "alice").stat().st_uid == 10001  # made on the shared /home, seen by the workers


def test_a_user_outside_the_allowed_group_is_refused(known_hosts):
    r = ssh("bob", "id", known_hosts, check=False)
    assert r.returncode == 255 and "uid=" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    # His key was good: SSSD's access check (simple_allow_groups) said no, and sshd says so.
    log = kubectl("-n", NS, "logs", login_pod(), "-c", "login").stdout
    assert "Access denied for user bob by PAM account configuration" in log, log[-2000:]


def forget_alice() -> None:
    """What this file (or scripts/demo --with-site) adds to the site's associations goes."""
    for what in (["user", "alice"], ["account", "physics"], ["qos", "short"]):
        slurm("sacctmgr", "-i", "delete", *what, check=False)


def test_a_job_runs_and_is_accounted_as_the_directory_user(known_hosts):
    forget_alice()
    # No association: AccountingStorageEnforce refuses alice's job.
    r = ssh("alice", "sbatch --parsable --wrap true", known_hosts, check=False)
    assert r.returncode != 0 and "Invalid account" in r.stderr, (r.stdout, r.stderr)
    for cmd in (["sacctmgr", "-i", "add", "qos", "short", "MaxWall=00:01:00", "Flags=DenyOnLimit"],
                ["sacctmgr", "-i", "add", "account", "physics"],
                ["sacctmgr", "-i", "add", "user", "alice", "account=physics", "qos=normal,short"]):
        slurm(*cmd)
    job = wait_until("alice's association to reach slurmctld", lambda: (
        r := ssh("alice", "sbatch --parsable --time=1 --qos=short -o %j.out --wrap 'id -u; id -g'",
                 known_hosts, check=False)).returncode == 0 and r.stdout.strip(), 60, cluster_state)
    assert ssh("alice", "srun -N1 id -u", known_hosts).stdout.split() == ["10001"]
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 90, cluster_state)
    assert (HOME / "alice" / f"{job}.out").read_text().split() == ["10001", "10000"]
    shown = slurm("scontrol", "show", "job", job, "-o")
    assert "UserId=alice(10001)" in shown and "GroupId=hpc(10000)" in shown, shown

    # The QOS limit: a job asking for more than a minute is refused at submission.
    r = ssh("alice", "sbatch --parsable --time=5 --qos=short --wrap true", known_hosts, check=False)
    assert r.returncode != 0 and "QOS" in r.stderr, (r.stdout, r.stderr)

    def accounted():
        out = slurm("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,User,Group,Account,State", check=False)
        return out.strip() == f"{job}|alice|hpc|physics|COMPLETED" or None

    wait_until(f"sacct to show job {job} as alice's", accounted, 60,
               lambda: slurm("sacct", "-X", "-j", job, check=False))


def test_a_user_may_ssh_to_a_worker_only_while_their_job_runs_there(known_hosts):
    """NodeSet spec.ssh: sshd in the slurmd container, users from the same SSSD, and
    pam_slurm_adopt letting in only the owner of a job on that node. alice's key for it is one
    she makes in her shared home, as users do."""
    # A worker of an earlier cluster on this bed had other host keys.
    ssh("alice", "ssh-keygen -R slinky-0 >/dev/null 2>&1; test -f ~/.ssh/id_ed25519 || "
                 "{ ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/id_ed25519 && "
                 "cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys; }", known_hosts)
    to_worker = "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=10 slinky-0 hostname"
    refused = ssh("alice", to_worker, known_hosts, check=False)
    assert refused.returncode == 255 and "slinky-0" not in refused.stdout, (refused.stdout, refused.stderr)
    assert "Access denied by pam_slurm_adopt: you have no active jobs on this node" in refused.stderr, \
        refused.stderr
    job = alice_submits(known_hosts, "--qos=normal", "--time=2", "-w", "slinky-0", "--wrap", "'sleep 60'")
    try:
        wait_until(f"job {job} running", lambda: job_state(job) == "RUNNING", 60, cluster_state)
        let_in = ssh("alice", to_worker, known_hosts, check=False)
        assert let_in.returncode == 0 and let_in.stdout.split() == ["slinky-0"], (let_in.stdout, let_in.stderr)
    finally:
        slurm("scancel", job)


def test_slurmdbd_keeps_no_privilege():
    """The accounting pod's containers too: no capability, no escalation, a read-only root
    filesystem, not root (see test_slurm_cluster's check of the other pods)."""
    assert get("pods", ns=NS).get("items"), "the cluster's pods are there to look at"
    assert privilege_findings((NS,)) == []


def test_no_secret_is_ever_shown():
    """The database password, Slurm's auth key, the JWT key and the tokens minted with it appear
    in no log, event, ConfigMap, status or pod environment of either namespace."""
    password = ENV["SITE_DB_PASSWORD"]
    assert leaked_secrets((NS, OPERATOR_NS), also={password: "the site's database password"}) == []


def test_login_host_keys_survive_a_new_login_pod(known_hosts):
    before = known_hosts.read_text()
    kubectl("-n", NS, "delete", "pod", login_pod(), "--wait=true", timeout=120)
    # The known host key from the first login: StrictHostKeyChecking=yes refuses any other.
    wait_until("alice to log in to the new pod with the known host key",
               lambda: ssh("alice", "hostname", known_hosts, check=False, strict="yes").returncode == 0,
               180, cluster_state)
    assert known_hosts.read_text() == before


def alice_submits(known_hosts: Path, *args: str) -> str:
    return ssh("alice", "sbatch --parsable " + " ".join(args), known_hosts).stdout.strip()


def replace_slurmctld_under_jobs(known_hosts: Path, how, settled) -> None:
    """A running job and one queued behind it, then `how()` replaces the slurmctld pod: the new
    one restores both from the volume, and the running job, which slurmd kept running, completes."""
    running = alice_submits(known_hosts, "--qos=normal", "--time=3", "--wrap", "'sleep 40'")
    wait_until(f"job {running} running", lambda: job_state(running) == "RUNNING", 60, cluster_state)
    queued = alice_submits(known_hosts, "--qos=normal", "--time=3", f"--dependency=afterok:{running}",
                           "--wrap", "true")
    old = get("pod", "slurm-controller-0")["metadata"]["uid"]
    how()

    def restored():
        pod = get("pod", "slurm-controller-0")
        return pod and pod["metadata"]["uid"] != old and settled(pod) and \
            (job_state(running), job_state(queued)) == ("RUNNING", "PENDING")

    wait_until("the new slurmctld to show both jobs as they were", restored, 180, cluster_state)
    wait_until(f"job {running} to complete", lambda: job_state(running) == "COMPLETED", 120, cluster_state)
    wait_until(f"job {queued} to run after it and complete", lambda: job_state(queued) == "COMPLETED", 120,
               cluster_state)


def test_slurmctlds_state_survives_a_new_pod(known_hosts):
    replace_slurmctld_under_jobs(
        known_hosts, lambda: kubectl("-n", NS, "delete", "pod", "slurm-controller-0", "--wait=true", timeout=120),
        lambda pod: True)


def test_slurmctlds_state_survives_a_rolling_update_of_its_image(known_hosts):
    image = "localhost/tightrope/slurmctld:26.05-b"
    replace_slurmctld_under_jobs(
        known_hosts, lambda: kubectl("-n", NS, "patch", "controller", RELEASE, "--type=merge", "-p",
                                     json.dumps({"spec": {"slurmctld": {"image": image}}})),
        lambda pod: pod["spec"]["containers"][0]["image"] == image)


def slurmdbd_signal(sig: str) -> None:
    kubectl("-n", NS, "exec", "slurm-accounting-0", "-c", "slurmdbd", "--", "sh", "-c",
            f"for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = slurmdbd ] && kill -{sig} ${{p#/proc/}}; done; true")


def dbd_queue() -> int:
    for line in slurm("sdiag").splitlines():
        if line.startswith("DBD Agent queue size:"):
            return int(line.split(":")[1])
    raise AssertionError("sdiag shows no DBD Agent queue")


def test_jobs_that_end_while_slurmdbd_is_away_are_recorded_after(known_hosts):
    """slurmdbd frozen, a job runs and ends, the pod is replaced: slurmctld kept the record and
    hands it to the new slurmdbd."""
    old = get("pod", "slurm-accounting-0")["metadata"]["uid"]
    slurmdbd_signal("STOP")
    job = alice_submits(known_hosts, "--qos=normal", "--time=1", "--wrap", "true")
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60, cluster_state)
    # Its records wait in slurmctld's queue for slurmdbd.
    assert dbd_queue() > 0, slurm("sdiag")
    kubectl("-n", NS, "delete", "pod", "slurm-accounting-0", "--grace-period=1", "--wait=true", timeout=120)
    wait_until("a new slurmdbd pod", lambda: (p := get("pod", "slurm-accounting-0")) and
               p["metadata"]["uid"] != old, 120, cluster_state)

    def recorded():
        out = slurm("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,User,State", check=False)
        return out.strip() == f"{job}|alice|COMPLETED" or None

    wait_until(f"sacct to show job {job}, which ended while slurmdbd was away", recorded, 180,
               lambda: cluster_state() + slurm("sdiag", check=False)[-1500:])
    wait_until("slurmctld's queue for slurmdbd to drain", lambda: dbd_queue() == 0, 60,
               lambda: slurm("sdiag", check=False))


def uninstall_cluster() -> None:
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120)


def install_cluster(tmp: Path, values: dict) -> None:
    """The cluster of single-node.yaml and `values` over it, up with its one worker idle."""
    path = tmp / "overlay.yaml"
    path.write_text(json.dumps(values))
    helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(path), timeout=120)
    wait_until("sinfo to show 1 idle worker", lambda: node_states() == {"slinky-0": "idle"}, 420,
               cluster_state, period=5)


def test_deleting_the_site_cluster_leaves_the_sites_data():
    forget_alice()  # the site's database keeps the jobs
    uninstall_cluster()
    # The directory and the database are the site's: untouched.
    assert (HOME / "alice").is_dir()
    assert not get("statefulset", "slurm-accounting")


def test_an_external_slurmdbd_keeps_the_clusters_records(tmp_path):
    """accounting.external: no slurmdbd pod; slurmctld reports to the site's slurmdbd (the bed's
    site-slurmdbd, which runs as the images' SlurmUser uid and trusts the bed's slurm.key)."""
    kubectl("-n", NS, "create", "secret", "generic", "site-slurm-key",
            f"--from-file=slurm.key={ENV['SLURM_KEY']}", check=False)
    values = json.loads(site_values(tmp_path).read_text())
    values["accounting"] = {"enabled": True, "external": True,
                            "externalConfig": {"host": ENV["SITE_SLURMDBD_HOST"],
                                               "port": int(ENV["SITE_SLURMDBD_PORT"])}}
    values["slurmKey"] = {"secretRef": {"name": "site-slurm-key", "key": "slurm.key"}}
    try:
        install_cluster(tmp_path, values)
        assert not get("statefulset", "slurm-accounting")
        wait_until("the cluster registered with the site's slurmdbd", lambda: "slurm_slurm" in slurm(
            "sacctmgr", "-n", "-P", "show", "cluster", "format=cluster", check=False).split(), 60, cluster_state)
        job = submit("--wrap", "true")  # as root, whose association every cluster gets
        wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60, cluster_state)

        def recorded():
            out = slurm("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,User,State,Cluster", check=False)
            return out.strip() == f"{job}|root|COMPLETED|slurm_slurm" or None

        wait_until(f"the site's slurmdbd to show job {job}", recorded, 60,
                   lambda: slurm("sacct", "-X", "-j", job, check=False))
    finally:
        uninstall_cluster()


# A NodeSet whose jobs Slurm tracks and confines with cgroups (the bed's host has cgroup v1).
CGROUP_VALUES = {
    "controller": {"extraConf": "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"},
    "configFiles": {"cgroup.conf": "CgroupPlugin=autodetect\nIgnoreSystemd=yes\nConstrainCores=yes\n"
                                   "ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n"},
    # No memory request: the kubelet gives the container oom_score_adj 999, slurmstepd cannot go
    # below it on the bed (no CAP_SYS_RESOURCE), and the entrypoint has it go where its tasks go.
    "nodesets": {"slinky": {"replicas": 1}},
}


def jobs_confined(reason: str):
    c = nodeset_condition(NODESET, "JobsConfined")
    return c if c.get("reason") == reason else None


def over_its_memory(*where: str) -> subprocess.CompletedProcess:
    """A task reading 300 MB into memory in a 50 MB job, which Slurm's cgroup is to kill. The job's
    own time limit bounds it: a task that is not killed ends the job TIMEOUT, and the failure shows
    the queue and the node rather than an exec that never came back."""
    try:
        return kubectl("-n", NS, "exec", login_pod(), "-c", "login", "--", "srun", *where, "--mem=50M", "--time=1",
                       "sh", "-c", "head -c 300M /dev/zero | tail >/dev/null", check=False, timeout=180)
    except subprocess.TimeoutExpired as e:
        queue = slurm("squeue", "-t", "all", "-o", "%i %T %R %M %N", check=False)
        nodes = slurm("scontrol", "show", "node", check=False)
        raise AssertionError(f"srun over its memory did not end: {e}\n{queue}\n{nodes}") from None


def test_slurm_confines_a_job_to_its_memory_with_cgroups_and_the_pod_lives_on(tmp_path):
    try:
        # Confined on the host's cgroup v1, slurmstepd even with its tasks before the OOM killer.
        install_cluster(tmp_path, CGROUP_VALUES)
        c = wait_until("JobsConfined to say jobs are held", lambda: jobs_confined("CgroupsEnforced"), 240,
                       cluster_state, period=5)
        assert c["status"] == "True" and "1 node: cgroup v1, writable, memory controller" in c["message"], c
        wait_until("slinky-0 idle", lambda: node_states() == {"slinky-0": "idle"} and len(workers()) == 1, 120,
                   cluster_state)
        (pod,) = workers()
        # The job's task in the memory, cpuset and freezer cgroups Slurm made for the step.
        cgroups = slurm("srun", "--mem=50M", "cat", "/proc/self/cgroup", timeout=60)
        for controller in ("memory", "cpuset", "freezer"):
            line = next(l for l in cgroups.splitlines() if l.split(":")[1] == controller)
            assert "/slurm_slinky-0/uid_0/job_" in line and "/step_0" in line, cgroups
        # Over its memory: Slurm's cgroup kills the task, srun says why, the job ends OUT_OF_MEMORY.
        r = over_its_memory()
        assert r.returncode != 0 and "Out Of Memory" in r.stderr, r.stderr
        job = slurm("squeue", "-h", "-t", "all", "-o", "%i %T", check=False).split()
        last = max(int(j) for j in job[0::2])
        assert job_state(str(last)) == "OUT_OF_MEMORY", slurm("scontrol", "show", "job", str(last))
        # The pod was not touched: same pod, no restart, its node idle again.
        (after,) = workers()
        assert after["metadata"]["uid"] == pod["metadata"]["uid"]
        assert all(c["restartCount"] == 0 for c in after["status"]["containerStatuses"]), after["status"]
        wait_until("slinky-0 idle again", lambda: node_states() == {"slinky-0": "idle"}, 60, cluster_state)

        # Not privileged, with the capabilities the operator gives slurmd (docs/security.md): the
        # entrypoint makes the container's own read-only cgroup mounts writable (CAP_SYS_ADMIN)
        # and slurmd confines its jobs inside them, seeing none of the host's devices.
        nodeset = get("nodeset", NODESET)

        def worker_nodeset(name: str, security: dict) -> None:
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"controllerRef": nodeset["spec"]["controllerRef"], "replicas": 1,
                         "slurmd": {**nodeset["spec"]["slurmd"], "securityContext": security},
                         "logfile": nodeset["spec"].get("logfile", {}),
                         "partition": {"enabled": False}, "oversubscribeNode": True}}))

        least = f"{RELEASE}-worker-least"
        worker_nodeset(least, {"privileged": False})
        c = wait_until("the unprivileged NodeSet's jobs confined",
                       lambda: (c := nodeset_condition(least, "JobsConfined")) and
                       c.get("reason") == "CgroupsEnforced" and c, 240, cluster_state, period=5)
        assert "writable (remounted in an unprivileged container)" in c["message"], c
        (pod,) = [p for p in workers() if p["metadata"]["labels"].get("app.kubernetes.io/instance") == least]
        slurmd = next(c for c in pod["spec"]["containers"] if c["name"] == "slurmd")
        assert not slurmd["securityContext"].get("privileged"), slurmd
        host = pod["spec"]["hostname"]
        wait_until(f"{host} idle", lambda: node_states().get(host) == "idle", 120, cluster_state)
        cgroups = slurm("srun", "-w", host, "--mem=50M", "cat", "/proc/self/cgroup", timeout=60)
        memory = next(line for line in cgroups.splitlines() if line.split(":")[1] == "memory")
        assert "/job_" in memory and "/step_0" in memory, cgroups
        r = over_its_memory("-w", host)
        assert r.returncode != 0 and "Out Of Memory" in r.stderr, r.stderr
        # The host's devices stay out of the container (a privileged one has them all).
        devices = kubectl("-n", NS, "exec", pod["metadata"]["name"], "-c", "slurmd", "--", "ls", "/dev").stdout.split()
        assert "kmsg" not in devices and "mem" not in devices, devices
        kubectl("-n", NS, "delete", "nodeset", least, "--wait=true", "--timeout=120s", timeout=150)

        # Without CAP_SYS_ADMIN the mounts stay read-only: slurmd cannot make cgroups and exits,
        # and the NodeSet says why in slurmd's words, without `kubectl logs`.
        bad = f"{RELEASE}-worker-unprivileged"
        worker_nodeset(bad, {"privileged": False, "capabilities": {"drop": ["SYS_ADMIN"]}})
        ready = wait_until("the NodeSet to say why slurmd exits",
                           lambda: (c := nodeset_condition(bad, "Ready")) and c.get("reason") == "PodsFailing" and
                           "exit code" in c.get("message", "") and c, 180, cluster_state)
        assert "Read-only file system" in ready["message"] or "proctrack/cgroup" in ready["message"], ready
        kubectl("-n", NS, "delete", "nodeset", bad, "--wait=true", "--timeout=120s", timeout=150)
    finally:
        uninstall_cluster()


# Two GPU pods on the bed's Node, two of its four stand-in GPUs each (character devices 195:0-3,
# no driver behind them), in a cluster that keeps the operator's own slurm.conf, cgroup.conf and
# gres.conf (the default AutoDetect=full): single-node.yaml's fallback without cgroups is taken
# away, nothing else is added. What NVIDIA's driver would show in /proc/driver/nvidia and
# /sys/bus/pci/drivers/nvidia comes from the stand-in driver's files, mounted there before the
# image's entrypoint runs (no runtime mounts a volume inside /proc: docs/testbed.md).
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
STAND_IN_DRIVER = ("mount --bind /stand-in/proc-driver /proc/driver && "
                   "mount --bind /stand-in/sys-pci-drivers /sys/bus/pci/drivers && "
                   'exec /usr/local/sbin/slurmd-entrypoint "$@"')


def confined_gpu_nodesets() -> dict:
    driver = {"proc-driver": ENV["TESTBED_FAKE_GPU_DRIVER"], "sys-pci-drivers": ENV["TESTBED_FAKE_GPU_SYSFS"]}
    return {"gpu": {
        "replicas": 2, "oversubscribeNode": True, "pruneSlurmNodeRecords": "NodeNotFound",
        "partition": {"enabled": True, "configMap": {"State": "UP", "MaxTime": "UNLIMITED"}},
        "slurmd": {
            "resources": {"limits": {"nvidia.com/gpu": 2}},
            "command": ["/usr/bin/tini", "--", "/bin/sh", "-c", STAND_IN_DRIVER, "slurmd"],
            "volumeMounts": [{"name": n, "mountPath": f"/stand-in/{n}", "readOnly": True} for n in driver]},
        "podSpec": {"nodeSelector": {"nvidia.com/gpu.product": GPU_PRODUCT},
                    "volumes": [{"name": n, "hostPath": {"path": path, "type": "Directory"}}
                                for n, path in driver.items()]}}}


def confined_gpu_values() -> dict:
    """single-node.yaml without its fallback (its extraConf and cgroup.conf), with the GPU NodeSet."""
    values = yaml.safe_load(VALUES.read_text())
    values.pop("configFiles", None)
    values["controller"].pop("extraConf", None)
    values["nodesets"] = {"slinky": {**values["nodesets"]["slinky"], "replicas": 0}, **confined_gpu_nodesets()}
    return values


OPENS = 'echo "gpus=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS}"; for i in 0 1 2 3; do head -c0 /dev/nvidia$i 2>&1; done; true'


def opens(node: str, *args: str) -> dict[int, str]:
    """Each /dev/nvidia<i> as a job step on node finds it: "allowed" (ENXIO: the device cgroup
    let it through to a driver that is not there), "denied" (EPERM) or "absent" (the pod has
    not got it)."""
    out = slurm("srun", "-p", "gpu", "-w", node, "--mem=100M", *args, "sh", "-c", OPENS, timeout=60)
    seen = {}
    for i in range(4):
        line = next((line for line in out.splitlines() if f"/dev/nvidia{i}" in line), "")
        seen[i] = ("allowed" if "No such device or address" in line else
                   "denied" if "Operation not permitted" in line else
                   "absent" if "No such file or directory" in line else line)
    return seen


def pod_gpus(pod: dict) -> list[int]:
    """The stand-in GPUs the kubelet gave the pod, by their device nodes."""
    devices = kubectl("-n", NS, "exec", pod["metadata"]["name"], "-c", "slurmd", "--", "sh", "-c",
                      "ls /dev | grep -x 'nvidia[0-9]*'").stdout.split()
    return sorted(int(d.removeprefix("nvidia")) for d in devices)


def test_jobs_get_autodetected_gpus_and_only_theirs_cpus_and_memory_by_default(tmp_path):
    node = ENV["TESTBED_NODE"]
    kubectl("label", "node", node, f"nvidia.com/gpu.product={GPU_PRODUCT}", "--overwrite")
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(confined_gpu_values()))
    try:
        helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(path),
             timeout=120)
        wait_until("gpu-0 and gpu-1 idle with their GPUs", lambda: node_states() == {"gpu-0": "idle", "gpu-1": "idle"}
                   and all("Gres=gpu:nvidia_h100_80gb_hbm3:2" in slurm("scontrol", "show", "node", n, "-o")
                           for n in ("gpu-0", "gpu-1")), 420, cluster_state, period=5)
        conf = get("configmap", f"{RELEASE}-config")["data"]
        assert "TaskPlugin=task/cgroup,task/affinity" in conf["slurm.conf"], conf["slurm.conf"]
        assert "ConstrainDevices=yes" in conf["cgroup.conf"], conf["cgroup.conf"]
        assert "AutoDetect=full" in conf["gres.conf"] and "File=" not in conf["gres.conf"], conf["gres.conf"]
        c = wait_until("JobsConfined True", lambda: (c := nodeset_condition(f"{RELEASE}-worker-gpu", "JobsConfined"))
                       and c.get("reason") == "CgroupsEnforced" and c, 120, cluster_state)
        assert "cgroup v1, writable, memory controller, device control" in c["message"], c
        c = nodeset_condition(f"{RELEASE}-worker-gpu", "GpuCountsMatch")
        assert c and c["status"] == "True", c

        # Each slurmd autodetected the pod's own two GPUs, not the Node's four; the kernel checks
        # the device cgroup before it looks for a driver. A job given one GPU passes it for that
        # one (ENXIO) and is refused the pod's other (EPERM); the other pod's are not there.
        pods = {p["spec"]["hostname"]: p for p in workers()}
        held = {host: pod_gpus(pod) for host, pod in pods.items()}
        assert sorted(held["gpu-0"] + held["gpu-1"]) == [0, 1, 2, 3], held
        for host, mine in held.items():
            one = opens(host, "--gres=gpu:1")
            assert sorted(one[i] for i in mine) == ["allowed", "denied"], (host, one)
            assert all(one[i] == "absent" for i in range(4) if i not in mine), (host, one)
            both = opens(host, "--gres=gpu:2")
            assert all(both[i] == "allowed" for i in mine), (host, both)
        # Two jobs at once on one node, one GPU each: neither can open the other's.
        running = submit("-p", "gpu", "-w", "gpu-0", "--gres=gpu:1", "--mem=100M", "--time=2", "--wrap", "sleep 60")
        wait_until(f"job {running} running", lambda: job_state(running) == "RUNNING", 60, cluster_state)
        second = opens("gpu-0", "--gres=gpu:1")
        assert sorted(second[i] for i in held["gpu-0"]) == ["allowed", "denied"], second
        slurm("scancel", running)

        # CPUs: a task given one CPU runs on one CPU, and one given two on both of the bed's.
        one = slurm("srun", "-p", "gpu", "-w", "gpu-0", "-c1", "--mem=100M", "grep", "Cpus_allowed_list",
                    "/proc/self/status", timeout=60).split()[-1]
        assert one.isdigit(), one
        two = slurm("srun", "-p", "gpu", "-w", "gpu-0", "-c2", "--mem=100M", "grep", "Cpus_allowed_list",
                    "/proc/self/status", timeout=60).split()[-1]
        assert two in ("0-1", "0,1"), two

        # Memory: over its 50 MB the task is killed by its cgroup; the pod and slurmd live on.
        before = pods["gpu-0"]
        r = over_its_memory("-p", "gpu", "-w", "gpu-0")
        assert r.returncode != 0 and "Out Of Memory" in r.stderr, r.stderr
        after = {p["spec"]["hostname"]: p for p in workers()}["gpu-0"]
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert all(s["restartCount"] == 0 for s in after["status"]["containerStatuses"]), after["status"]
        wait_until("gpu-0 idle again", lambda: node_states().get("gpu-0") == "idle", 60, cluster_state)
    finally:
        uninstall_cluster()
        kubectl("label", "node", node, "nvidia.com/gpu.product-", check=False)


def test_a_health_check_runs_on_the_workers_and_their_findings_reach_slurm(tmp_path):
    """docs/health.md, passive checks: a HealthCheck makes slurm.conf run tightrope-health and
    gives the selected NodeSet's pods its checks (no pod rolls for it); each worker's verdict
    arrives in its node's Extra, a site script's failure with its first line; the operator drains
    the node for it and undrains it once the check passes again (replace: false; the three-Node
    e2e shows the replacement)."""
    scripts = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site-health", "namespace": NS},
               "data": {"fans": '#!/bin/sh\nif [ -e /run/fan-stopped ]; then echo "fan 3 stopped"; exit 1; fi\n'}}
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "workers", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 12, "timeoutSeconds": 5,
                                                          "mounts": ["/etc/slurm"],
                                                          "scripts": {"configMapRef": {"name": "site-health"}}},
                      "remediation": {"replace": False}}}
    try:
        install_cluster(tmp_path, {"nodesets": {"slinky": {"replicas": 1}}})
        (before,) = workers()
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(scripts))
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        ready = wait_until("the HealthCheck to hand out its checks", lambda: next(
            (c for c in get("healthcheck.tightrope.slurm.net", "workers", NS).get("status", {}).get("conditions", [])
             if c["type"] == "Ready" and c["status"] == "True"), None), 60, cluster_state)
        assert ready["reason"] == "ChecksDistributed" and NODESET in ready["message"], ready
        conf = get("configmap", f"{RELEASE}-config")["data"]["slurm.conf"]
        assert "HealthCheckProgram=/usr/local/sbin/tightrope-health" in conf, conf
        assert "HealthCheckInterval=12" in conf and "HealthCheckTimeout=9" in conf, conf
        health = get("configmap", f"{NODESET}-health")["data"]
        assert json.loads(health["checks.json"])["mounts"] == ["/etc/slurm"], health
        assert "script.fans" in health, health

        # slurmctld restarts on its new slurm.conf; the worker's pod stays, and the kubelet brings
        # it the checks within its ConfigMap refresh (about a minute).
        report = wait_until("a healthy report from slinky-0", lambda: health_report("slinky-0").get("ok") and
                            health_report("slinky-0"), 240, cluster_state, period=5)
        assert report["failed"] == [], report
        (after,) = workers()
        assert after["metadata"]["uid"] == before["metadata"]["uid"], "a HealthCheck rolled the worker"

        # The site's script fails: the finding, with its first line, is in Slurm within an interval.
        kubectl("-n", NS, "exec", after["metadata"]["name"], "-c", "slurmd", "--", "touch", "/run/fan-stopped")
        report = wait_until("the failing script in slinky-0's report",
                            lambda: not health_report("slinky-0").get("ok", True) and health_report("slinky-0"),
                            60, cluster_state, period=3)
        assert report["failed"] == [{"check": "script:fans", "message": "fan 3 stopped"}], report
        # The operator's own doctor check says so on the Controller, within its check period.
        wait_until("the Controller to name the failing check", lambda: next(
            (c for c in get("controller", RELEASE).get("status", {}).get("conditions", [])
             if c["type"] == "Healthy" and "health-check-failed: Slurm node slinky-0" in c.get("message", "")),
            None), 90, cluster_state)
        # The operator drains it, naming the check, and says so on the NodeSet.
        wait_until("slinky-0 drained for its check", lambda: node_states().get("slinky-0") in ("drain", "drng"), 60,
                   cluster_state)
        reason = drain_reason("slinky-0")
        assert reason == "slurm-operator: healthcheck: script:fans: fan 3 stopped", reason
        healthy = nodeset_condition(NODESET, "WorkersHealthy")
        assert healthy["status"] == "False" and healthy["reason"] == "Remediating", healthy
        kubectl("-n", NS, "exec", after["metadata"]["name"], "-c", "slurmd", "--", "rm", "/run/fan-stopped")
        wait_until("slinky-0 healthy again", lambda: health_report("slinky-0").get("ok"), 60, cluster_state, period=3)
        wait_until("slinky-0 undrained once its check passes", lambda: node_states().get("slinky-0") == "idle", 60,
                   cluster_state)
        assert workers()[0]["metadata"]["uid"] == before["metadata"]["uid"], "replace: false replaced the pod"

        # Without the HealthCheck its ConfigMap goes with it.
        kubectl("-n", NS, "delete", "healthcheck.tightrope.slurm.net", "workers", "--wait=true", timeout=60)
        wait_until(f"{NODESET}-health to go", lambda: kubectl(
            "-n", NS, "get", "configmap", f"{NODESET}-health", check=False).returncode != 0, 60, cluster_state)
    finally:
        kubectl("-n", NS, "delete", "healthcheck.tightrope.slurm.net", "workers", "--ignore-not-found", check=False)
        kubectl("-n", NS, "delete", "configmap", "site-health", "--ignore-not-found", check=False)
        uninstall_cluster()


def slurmctld_signal(pod: str, sig: str) -> None:
    kubectl("-n", NS, "exec", pod, "-c", "slurmctld", "--", "sh", "-c",
            f"for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = slurmctld ] && kill -{sig} ${{p#/proc/}}; done; true")


def start_time(job: str) -> str:
    out = slurm("scontrol", "show", "job", job, "-o")
    return next(f.split("=", 1)[1] for f in out.split() if f.startswith("StartTime="))


def active_controller() -> list[str]:
    pods = get("pod", "", NS).get("items", [])
    return [p["metadata"]["name"] for p in pods
            if p["metadata"].get("labels", {}).get("controller.slinky.slurm.net/active") == "true"]


def test_a_backup_slurmctld_takes_over_from_a_failed_primary_and_no_job_is_lost(tmp_path, known_hosts):
    """controller.ha: two slurmctld pods on one claim. The primary freezes (SIGSTOP); the backup
    takes over with the state on the claim; the primary's liveness probe restarts it, and it takes
    control back from the backup's state. A running job and one queued behind it both complete."""
    site_namespace()
    kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "slurm-state"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": ENV["STORAGE_CLASS"],
                 "resources": {"requests": {"storage": "1Gi"}}}}))
    values = json.loads(site_values(tmp_path).read_text())
    controller = values.setdefault("controller", {})
    controller["ha"] = {"enabled": True, "backups": 1}
    # One claim for both; ReadWriteOnce is enough when both pods share the bed's one Node, which
    # the default anti-affinity (one slurmctld per Node) would not allow.
    controller["persistence"] = {"enabled": True, "existingClaim": "slurm-state"}
    controller.setdefault("podSpec", {})["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    controller["extraConf"] = controller.get("extraConf", "") + "SlurmctldTimeout=10\n"
    try:
        install_cluster(tmp_path, values)
        wait_until("both slurmctlds up", lambda: list(controllers_up().values()) == ["UP", "UP"], 120,
                   lambda: slurm("scontrol", "ping", check=False))
        wait_until("the primary labelled active", lambda: active_controller() == ["slurm-controller-0"], 60,
                   cluster_state)
        # install_cluster waits for the worker; the login pod's sshd may come a moment later.
        wait_until("alice to log in", lambda: ssh("alice", "true", known_hosts, check=False).returncode == 0, 120,
                   cluster_state)
        slurm("sacctmgr", "-i", "add", "account", "physics", check=False)  # the site's database may
        slurm("sacctmgr", "-i", "add", "user", "alice", "account=physics", check=False)  # have them
        # Long enough to end after the primary is back: a handover while a job starts or ends is
        # another test.
        running = alice_submits(known_hosts, "--time=5", "--wrap", "'sleep 120'")
        wait_until(f"job {running} running", lambda: job_state(running) == "RUNNING", 60, cluster_state)
        queued = alice_submits(known_hosts, "--time=3", f"--dependency=afterok:{running}", "--wrap", "true")
        started = start_time(running)
        # slurmctld writes a change to StateSaveLocation within seconds (batched): a primary that
        # fails sooner leaves the backup a state without it, and the job runs again.
        time.sleep(15)

        slurmctld_signal("slurm-controller-0", "STOP")
        wait_until("the backup in control", lambda: controllers_up() == {
            "slurm-controller-0": "DOWN", "slurm-controller-1": "UP"}, 120,
            lambda: slurm("scontrol", "ping", check=False))
        # A frozen primary still takes connections, so clients that try it first wait for their
        # timeout: what the backup holds is asked after the primary's restart gives control back.
        wait_until("the primary back in control", lambda: controllers_up().get("slurm-controller-0") == "UP", 240,
                   lambda: slurm("scontrol", "ping", check=False))
        wait_until(f"job {running} to complete", lambda: job_state(running) == "COMPLETED", 180, cluster_state)
        assert start_time(running) == started, "the job ran again: " + slurm("sacct", "-j", running, check=False)
        wait_until(f"job {queued} to run after it and complete", lambda: job_state(queued) == "COMPLETED", 120,
                   cluster_state)
        wait_until("the primary labelled active again", lambda: active_controller() == ["slurm-controller-0"],
                   90, cluster_state)
    finally:
        forget_alice()
        uninstall_cluster()


def test_the_operator_uninstalls():
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=150)
