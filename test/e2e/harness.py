"""What every e2e file drives the bed's cluster with: the bed's environment, kubectl and helm,
Slurm commands run in the login pod, and bounded waits that print what the cluster showed last.
The chart is installed as release "slurm" in namespace "slurm", the operator in "slinky"."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BED = os.environ.get("TESTBED_NAME", "e2e")
OPERATOR_NS = "slinky"
NS = "slurm"
RELEASE = "slurm"
NODESET = f"{RELEASE}-worker-slinky"
HOST = "slinky-"  # the chart names a NodeSet's Slurm nodes <nodeset key>-<ordinal>
VALUES = REPO / "deploy/helm/values/single-node.yaml"


def bed_env() -> dict:
    out = subprocess.run([str(REPO / "scripts/testbed"), "--name", BED, "env"], check=True,
                         capture_output=True, text=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    return env


ENV = bed_env()


def run(*cmd: str, check: bool = True, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout, input=stdin)
    if check and r.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def bed_command(*args: str, timeout: float = 300) -> str:
    """scripts/testbed on the bed (`node power-off 2`, `up`, ...): its output."""
    return run(str(REPO / "scripts/testbed"), "--name", BED, *args, timeout=timeout).stdout


def kubectl(*args: str, **kw) -> subprocess.CompletedProcess:
    return run(ENV["KUBECTL"], *args, **kw)


def helm(*args: str, **kw) -> subprocess.CompletedProcess:
    return run(ENV["HELM"], *args, **kw)


def get(kind: str, name: str = "", ns: str = NS) -> dict:
    r = kubectl("-n", ns, "get", kind, *([name] if name else []), "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def wait_until(what: str, probe, timeout: float, explain=None, period: float = 2.0):
    """Returns probe()'s first truthy value; fails after `timeout` s with what explain() shows."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, subprocess.TimeoutExpired, ValueError) as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(period)
    detail = explain() if explain else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}\n{detail}")


def cluster_state() -> str:
    pods = kubectl("-n", NS, "get", "pods", "-o", "wide", check=False).stdout
    nodesets = kubectl("-n", NS, "get", "nodesets", "-o", "yaml", check=False).stdout
    events = kubectl("-n", NS, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout
    leader = operator_leader()
    operator = kubectl("-n", OPERATOR_NS, "logs", leader, "--tail=40", check=False).stdout if leader else \
        "no operator holds the Lease"
    return f"pods:\n{pods}\nnodesets:\n{nodesets[-3000:]}\nevents:\n{events[-3000:]}\noperator:\n{operator}"


def login_pod() -> str:
    pods = get("pods")
    for p in pods.get("items", []):
        labels = p["metadata"].get("labels", {})
        if labels.get("app.kubernetes.io/name") == "login" and "deletionTimestamp" not in p["metadata"]:
            return p["metadata"]["name"]
    raise AssertionError("no login pod")


def slurm(*cmd: str, check: bool = True, timeout: float = 120) -> str:
    """A Slurm command run in the login pod, as a user of the cluster would."""
    return kubectl("-n", NS, "exec", login_pod(), "-c", "login", "--", *cmd, check=check,
                   timeout=timeout).stdout


def node_states() -> dict[str, str]:
    """Slurm node name -> its state, as sinfo prints it (idle, alloc, drain, drng, ...)."""
    out = slurm("sinfo", "-h", "-N", "-o", "%N %t")
    return dict(line.split() for line in out.splitlines() if line.strip())


def drain_reason(node: str) -> str:
    """The Slurm node's reason, whole (sinfo cuts it)."""
    return json.loads(slurm("scontrol", "show", "node", node, "--json"))["nodes"][0].get("reason", "")


def health_report(node: str, key: str = "tightrope.slurm.net/health") -> dict:
    """What tightrope-health last wrote into the node's Extra ({} before its first report); the
    active checks' report under key tightrope.slurm.net/health-active."""
    nodes = json.loads(slurm("scontrol", "show", "node", node, "--json", check=False) or "{}").get("nodes") or [{}]
    out = nodes[0].get("extra", "")
    try:
        return json.loads(out).get(key, {})
    except json.JSONDecodeError:
        return {}


def workers() -> list[dict]:
    return [p for p in get("pods").get("items", [])
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "slurmd"]


def placement() -> dict[str, str]:
    """Slurm node name -> the Kubernetes Node its pod runs on, for the workers not going away."""
    return {p["spec"]["hostname"]: p["spec"].get("nodeName", "") for p in workers()
            if "deletionTimestamp" not in p["metadata"] and p.get("status", {}).get("phase") == "Running"}


def controllers_up() -> dict[str, str]:
    """slurmctld host -> UP or DOWN, as `scontrol ping` says (primary first)."""
    out = slurm("scontrol", "ping", check=False, timeout=90)
    return {line.split(" at ")[1].split()[0]: line.rsplit(" ", 1)[1] for line in out.splitlines() if " at " in line}


# The states a job ends in.
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED")


def job_state(job: str) -> str:
    out = slurm("scontrol", "show", "job", job, "-o", check=False)
    for field in out.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return ""


def submit(*args: str) -> str:
    out = slurm("sbatch", "--parsable", *args)
    return out.strip().split(";")[0]


def pod_condition(pod: dict, type_: str) -> str:
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c["status"]
    return ""


def operator_leader() -> str:
    """The operator pod that holds the Lease, "" while none does (its identity is the pod's
    name, "_", a number)."""
    holder = get("lease", "slurm-operator", OPERATOR_NS).get("spec", {}).get("holderIdentity") or ""
    return holder.rsplit("_", 1)[0]


def operator_metrics() -> str:
    """The leading operator's /metrics, from its pod (the host reaches the pod network): a
    standby reports no Slurm series."""
    leader = wait_until("an operator to hold the Lease", operator_leader, 60)
    ip = get("pod", leader, OPERATOR_NS).get("status", {}).get("podIP")
    assert ip, f"the leading operator {leader} has no IP"
    with urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=10) as r:
        return r.read().decode()


def nodeset_condition(name: str, type_: str) -> dict:
    for c in get("nodeset", name).get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c
    return {}


def nodeset_ready(name: str) -> dict:
    return nodeset_condition(name, "Ready")


# --------------------------------------------------------------------------------------------


def webhook_answers() -> bool:
    """A server-side dry run of a NodeSet in the operator's namespace: accepted or refused, the
    admission webhook answered, which the API server's "failed calling webhook" says it did not."""
    probe = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
             "metadata": {"name": "webhook-probe", "namespace": OPERATOR_NS},
             "spec": {"controllerRef": {"name": "webhook-probe"}}}
    r = kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe), check=False)
    return "failed calling webhook" not in r.stderr


def install_cluster(name: str, overlay: dict) -> None:
    """The slurm chart as release "slurm" in namespace "slurm": single-node.yaml with `overlay`
    over it (kept as <bed>/<name>-values.json for a person to look at)."""
    kubectl("create", "namespace", NS, check=False)
    path = Path(ENV["TESTBED_DIR"]) / f"{name}-values.json"
    path.write_text(json.dumps(overlay))
    helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(path), timeout=120)


def install_operator(*values: str):
    """The operator's chart (`values`: helm --set arguments); returns once its admission webhook
    answers: Helm's --wait ends when the webhook pod is Ready, and kube-proxy may program its
    Service a moment later, until when the API server's calls are refused."""
    helm("upgrade", "--install", "slurm-operator", str(REPO / "deploy/helm/slurm-operator"), "-n", OPERATOR_NS,
         "--create-namespace", *[a for v in values for a in ("--set", v)], "--wait", "--timeout", "180s",
         timeout=240)
    wait_until("the admission webhook to answer", webhook_answers, 60)


# Secret keys whose values are public by design (certificates) or not secret at all.
PUBLIC_SECRET_KEYS = {"ca.crt", "tls.crt"}
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}")


def secret_needles(namespaces: tuple[str, ...]) -> dict[str, str]:
    """What no log, event, status or ConfigMap may show: each value of each Secret in
    `namespaces` (Slurm's auth key, the JWT key, tokens, the database password), as stored
    (base64) and, when it is text, as itself. Needle -> where it comes from."""
    needles = {}
    for ns in namespaces:
        for s in get("secrets", ns=ns).get("items", []):
            for key, b64 in (s.get("data") or {}).items():
                if key in PUBLIC_SECRET_KEYS or len(b64) < 12:
                    continue
                where = f"{ns}/{s['metadata']['name']}[{key}]"
                needles[b64] = where
                raw = base64.b64decode(b64)
                try:
                    text = raw.decode().strip()
                except UnicodeDecodeError:
                    needles[raw.hex()] = where + " (hex)"
                    continue
                if len(text) >= 8:
                    needles[text] = where
    return needles


def shown_texts(namespaces: tuple[str, ...]) -> dict[str, str]:
    """Everything an administrator or a user with read access is shown: each container's log
    (the previous instance's too), events, ConfigMaps, the status of the slinky.slurm.net objects
    and pods' environments. Place -> text."""
    texts = {}
    kinds = "configmaps,events,controllers,nodesets,loginsets,restapis,accountings,tokens"
    for ns in namespaces:
        texts[f"{ns}: {kinds}"] = kubectl("-n", ns, "get", kinds, "-o", "json", check=False).stdout
        for pod in get("pods", ns=ns).get("items", []):
            name = pod["metadata"]["name"]
            for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
                texts[f"{ns}/{name} env of {c['name']}"] = json.dumps(c.get("env", []))
                for previous in ("false", "true"):
                    r = kubectl("-n", ns, "logs", name, "-c", c["name"], f"--previous={previous}", check=False)
                    texts[f"{ns}/{name}/{c['name']} log (previous={previous})"] = r.stdout
    return texts


def leaked_secrets(namespaces: tuple[str, ...], also: dict[str, str] | None = None) -> list[str]:
    """Where a Secret's value, or any JWT, shows (see secret_needles and shown_texts). `also`:
    more needles (value -> name), for a value too short to be looked for in every Secret."""
    needles = {**secret_needles(namespaces), **(also or {})}
    leaks = []
    for place, text in shown_texts(namespaces).items():
        leaks += [f"{where} in {place}" for needle, where in needles.items() if needle in text]
        leaks += [f"a JWT ({m[:12]}...) in {place}" for m in JWT.findall(text)]
    return leaks


# Containers that keep privileges, and why (docs/reliability.md, "Pods' privileges"): name of the
# pod's app.kubernetes.io/name label, container -> what it keeps.
PRIVILEGED_BY_NEED = {
    # cgroups for each job, devices (GPUs), the job's user, BPF device filters, NET_ADMIN and
    # SYS_ADMIN for job containment; Slinky's slurmd runs privileged too.
    ("slurmd", "slurmd"): "privileged",
    # sshd and sackd: root, which becomes the user logging in.
    ("login", "login"): "root",
    # Root with CHOWN and FOWNER only: gives the keys to slurm before sackd starts.
    ("login", "initconf"): "root with CHOWN, FOWNER",
}
# Pods whose every container also runs as a user other than root.
NON_ROOT = {"slurm-operator", "slurm-operator-webhook", "slurmctld", "slurmrestd", "slurmdbd"}


def privilege_findings(namespaces: tuple[str, ...]) -> list[str]:
    """Every container of every pod in `namespaces` that keeps more than it needs: each must
    have no privilege escalation, no capability (the exceptions above apart), a read-only root
    filesystem and, in the NON_ROOT pods, a non-root user."""
    found = []
    for ns in namespaces:
        for pod in get("pods", ns=ns).get("items", []):
            app = pod["metadata"].get("labels", {}).get("app.kubernetes.io/name", "")
            pod_sc = pod["spec"].get("securityContext") or {}
            for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
                where = f"{ns}/{pod['metadata']['name']}/{c['name']}"
                sc = c.get("securityContext") or {}
                need = PRIVILEGED_BY_NEED.get((app, c["name"]))
                if need == "privileged" or need == "root":
                    continue
                added = set((sc.get("capabilities") or {}).get("add", []))
                allowed = {"CHOWN", "FOWNER"} if need else set()
                if sc.get("privileged"):
                    found.append(f"{where} is privileged")
                if sc.get("allowPrivilegeEscalation") is not False:
                    found.append(f"{where} may escalate its privileges")
                if "ALL" not in (sc.get("capabilities") or {}).get("drop", []) or added - allowed:
                    found.append(f"{where} keeps capabilities (drop {sc.get('capabilities')})")
                if sc.get("readOnlyRootFilesystem") is not True:
                    found.append(f"{where} may write its root filesystem")
                non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
                if app in NON_ROOT and non_root is not True:
                    found.append(f"{where} may run as root")
    return found
