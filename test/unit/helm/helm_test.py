#!/usr/bin/env python3
"""The Helm charts of deploy/helm: both lint clean, render what the golden files hold, refuse
invalid values naming the value's path, and every custom resource they render fits its CRD.

    HELM=/path/to/helm test/unit/helm/helm_test.py            # check
    HELM=/path/to/helm test/unit/helm/helm_test.py --update   # rewrite golden/ from the charts

Exits 77 (CTest's SKIP_RETURN_CODE) when $HELM is unset or not a program: helm comes from the
test bed's tools (`scripts/testbed tool-path helm`), not from the build.
"""
import argparse
import base64
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CHARTS = ROOT / "deploy" / "helm"
GOLDEN = HERE / "golden"
VALUES = HERE / "values"
SKIP = 77

# Golden renders: (name, chart, release, namespace, values files, whether the chart generates
# keys or certificates in this render). Generated values differ each run: they are checked,
# then written as <generated>.
CASES = [
    ("operator-default", "slurm-operator", "slurm-operator", "slinky", [], True),
    ("operator-namespaced", "slurm-operator", "slurm-operator", "slinky",
     ["operator-namespaced.yaml"], False),
    ("operator-no-webhook", "slurm-operator", "tightrope", "operators",
     ["operator-no-webhook.yaml"], False),
    ("operator-slinky", "slurm-operator", "slurm-operator", "slinky", ["operator-slinky.yaml"], False),
    ("operator-webhook-only", "slurm-operator", "slurm-operator", "slinky",
     ["operator-webhook-only.yaml"], True),
    ("slurm-default", "slurm", "slurm", "slurm", [], True),
    ("slurm-full", "slurm", "hpc", "hpc", ["slurm-full.yaml"], False),
    ("slurm-single-node", "slurm", "slurm", "slurm", ["deploy/helm/values/single-node.yaml"], True),
    ("slurm-slinky", "slurm", "hpc", "hpc", ["slurm-slinky.yaml"], True),
    ("bridge-default", "slurm-bridge", "slurm-bridge", "slurm-bridge", [], True),
    ("bridge-site", "slurm-bridge", "bridge", "slurm", ["bridge-site.yaml"], False),
    ("bridge-slinky", "slurm-bridge", "slurm-bridge", "slurm-bridge", ["bridge-slinky.yaml"], False),
]

# Values helm must refuse, and what its message must name: (chart, arguments, path, as a
# JSON pointer or dotted, either accepted since helm 3 and 4 word it differently).
INVALID = [
    ("slurm-operator", ["--set", "replicas=-1"], "replicas"),
    ("slurm-operator", ["--set", "image.pullPolicy=Sometimes"], "image/pullPolicy"),
    ("slurm-operator", ["--set", "leaderElection=maybe"], "leaderElection"),
    ("slurm-operator", ["--set", "operator.workers.nodeset=0"], "operator/workers/nodeset"),
    ("slurm-operator", ["--set", "webhook.failurePolicy=Never"], "webhook/failurePolicy"),
    ("slurm-operator", ["--set", "operator.mirrorSlurmDrains=always"], "operator/mirrorSlurmDrains"),
    ("slurm-operator", ["--set", "operator.resources.limts.cpu=1"], "operator/resources"),
    ("slurm-operator", ["--set", "operator.namespaces=Bad_NS"], "operator/namespaces"),
    ("slurm-operator", ["--set", "operator.nodesetWorkers=65"], "operator/nodesetWorkers"),
    ("slurm-operator", ["--set", "operator.replicas=-1"], "operator/replicas"),
    ("slurm-operator", ["--set", "webhook.validating.failurePolicy=Sometimes"],
     "webhook/validating/failurePolicy"),
    ("slurm-operator", ["--set", "certManager.enabled=yes"], "certManager/enabled"),
    ("slurm-operator", ["--set-string", "operator.metricsPort=08080"], "operator/metricsPort"),
    ("slurm", ["--set", "nodesets.slinky.replicas=-2"], "nodesets/slinky/replicas"),
    ("slurm", ["--set", "imagePullPolicy=Sometimes"], "imagePullPolicy"),
    ("slurm", ["--set", "controller.persistence.enabled=yes"], "controller/persistence/enabled"),
    ("slurm", ["--set", "restapi.replicas=one"], "restapi/replicas"),
    ("slurm", ["--set", "nodesets.slinky.scalingMode=Deployment"], "nodesets/slinky/scalingMode"),
    ("slurm", ["--set-string", "configFiles.slurm\\.conf=ClusterName=x"], "configFiles"),
    ("slurm-bridge", ["--set", "scheduler.groupWorkers=0"], "scheduler/groupWorkers"),
    ("slurm-bridge", ["--set", "admission.failurePolicy=Never"], "admission/failurePolicy"),
    ("slurm-bridge", ["--set", "sharedConfig.slurmRestApi=slurm:6820"], "sharedConfig/slurmRestApi"),
    ("slurm-bridge", ["--set", "admission.managedNamespaces={Bad_NS}"], "admission/managedNamespaces"),
]

# Values the schema cannot judge and the templates refuse: (chart, arguments, message part).
REFUSED = [
    ("slurm", ["--set", "nodesets.slinky.partition.enabled=true", "--set", "partitions.slinky.enabled=true",
               "--set", "partitions.slinky.nodesets={slinky}"],
     "partitions.slinky: NodeSet slinky already has a partition"),
    ("slurm", ["--set", "partitions.all.enabled=true", "--set", "partitions.all.nodesets={gpu}"],
     "partitions.all.nodesets: \"gpu\" is not an enabled NodeSet"),
    ("slurm", ["--set", "partitions.debug.config=x"],
     "partitions.debug.nodesets: a partition needs at least one NodeSet"),
    ("slurm-operator", ["--set", "webhook.certificate.cert=x"],
     "webhook.certificate: caCert, cert and key go together"),
    ("slurm-operator", ["--set", "replicas=2", "--set", "leaderElection=false"],
     "replicas: more than one operator needs leaderElection: true"),
    ("slurm-operator", ["--set", "operator.replicas=2", "--set", "operator.leaderElection=false"],
     "replicas: more than one operator needs leaderElection: true"),
    ("slurm-operator", ["--set", "operator.metricsSecure=true", "--set", "operator.metricsPort=0"],
     "operator.metricsSecure needs operator.metricsPort"),
    ("slurm-operator", ["--set", "certManager.enabled=true", "--set", "webhook.certificate.cert=x"],
     "webhook.certificate and certManager.enabled"),
    ("slurm-operator", ["--set", "webhook.metricsSecure=true", "--set", "webhook.metricsPort=0"],
     "webhook.metricsSecure needs webhook.metricsPort"),
    ("slurm-operator", ["--set-string", "operator.image="], "operator.image: an image is required"),
    ("slurm-operator", ["--set", "operator.image.repository=null", "--set", "operator.image.tag=1.2.3"],
     "operator.image.repository: an image repository is required"),
    ("slurm-operator", ["--set-string", "webhook.image.repository="],
     "webhook.image.repository: an image repository is required"),
    ("slurm", ["--set-string", "controller.slurmctld.image="],
     "controller.slurmctld.image: an image is required"),
    ("slurm", ["--set", "controller.slurmctld.image.repository=null"],
     "controller.slurmctld.image.repository: an image repository is required"),
    ("slurm", ["--set", "controller.slurmctld.image.tag=null"],
     "controller.slurmctld.image.tag: an image tag (or a digest) is required"),
    ("slurm", ["--set", "nodesets.gpu.replicas=1", "--set-string", "nodesets.gpu.slurmd.image.tag="],
     "nodesets.gpu.slurmd.image.tag: an image tag (or a digest) is required"),
    ("slurm", ["--set", "nodesets.gpu.replicas=1", "--set", "vendor.google.a3mega[0].targetNodeSet=gpu",
               "--set", "vendor.google.a3mega[0].networks={default,vpc1}"],
     "vendor.google.a3mega[0].networks: GKE A3 Mega takes exactly 9 networks, 2 given"),
    ("slurm", ["--set", "nodesets.gpu.replicas=1", "--set", "vendor.google.a3ultra[0].targetNodeSet=gpu"],
     "vendor.google.a3ultra[0].networks: GKE A3 Ultra takes exactly 9 networks, 0 given"),
    ("slurm-bridge", ["--set", "scheduler.replicaCount=2"],
     "more than one bridge needs scheduler.leaderElect: true"),
    ("slurm-bridge", ["--set", "admission.tls.existingSecret=x"],
     "admission.tls.caBundle: the CA of admission.tls.existingSecret"),
]

# The charts whose cases and checks run (--chart narrows it to one).
SELECTED = ["slurm-operator", "slurm", "slurm-bridge"]

# The CRDs (Slinky's six and Tightrope's HealthCheck) live once, in the slurm-operator-crds chart
# (a subchart of slurm-operator).
CRD_CHART = CHARTS / "slurm-operator" / "charts" / "slurm-operator-crds"
CRD_FILES = CRD_CHART / "files"

GENERATED_KEYS = ("ca.crt", "tls.crt", "tls.key", "caBundle", "slurm.key", "jwt_hs256.key", "jwt.key")
GENERATED_LINE = re.compile(r"^(\s*(?:- )?(" + "|".join(re.escape(k) for k in GENERATED_KEYS)
                            + r")): (\S+)$")


def helm(*args):
    return subprocess.run([os.environ["HELM"], *args], capture_output=True, text=True,
                          timeout=120)


def render(chart, release, namespace, args):
    result = helm("template", release, str(CHARTS / chart), "--namespace", namespace, *args)
    if result.returncode != 0:
        raise AssertionError(f"helm template {chart} {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def normalize(text, generated, failures, name):
    """Checks the generated values (base64, non-empty, every caBundle the Secret's CA) and
    replaces them with <generated>."""
    out = []
    cas = set()
    bundles = set()
    for line in text.splitlines():
        m = GENERATED_LINE.match(line)
        if m and generated:
            key, value = m.group(2), m.group(3)
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError:
                failures.append(f"{name}: {key} is not base64")
                raw = b""
            if not raw:
                failures.append(f"{name}: {key} is empty")
            if key == "ca.crt":
                cas.add(value)
            if key == "caBundle":
                bundles.add(value)
            if key in ("ca.crt", "tls.crt") and b"BEGIN CERTIFICATE" not in raw:
                failures.append(f"{name}: {key} is not a PEM certificate")
            line = f"{m.group(1)}: <generated>"
        out.append(line)
    if bundles and bundles != cas:
        failures.append(f"{name}: the webhook's caBundle is not the CA of its Secret")
    return "\n".join(out) + "\n"


def check_golden(update, failures):
    for name, chart, release, namespace, values, generated in CASES:
        if chart not in SELECTED:
            continue
        args = []
        for v in values:
            args += ["--values", str(ROOT / v if v.startswith("deploy/") else VALUES / v)]
        text = normalize(render(chart, release, namespace, args), generated, failures, name)
        if chart == "slurm-operator":
            text = fold_crds(text)
        path = GOLDEN / f"{name}.yaml"
        if update:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
            continue
        want = path.read_text() if path.exists() else ""
        if text != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                f"golden/{name}.yaml", "rendered"))
            failures.append(f"{name}: the render differs from the golden file "
                            f"(run {Path(__file__).name} --update after checking):\n{diff}")


def check_lint(failures):
    for chart in ("slurm-operator", "slurm", "slurm-bridge"):
        if chart not in SELECTED:
            continue
        result = helm("lint", "--strict", str(CHARTS / chart))
        if result.returncode != 0:
            failures.append(f"helm lint {chart}:\n{result.stdout}{result.stderr}")


def check_invalid(failures):
    for chart, args, path in INVALID:
        if chart not in SELECTED:
            continue
        result = helm("template", "x", str(CHARTS / chart), *args)
        named = path in result.stderr or path.replace("/", ".") in result.stderr
        if result.returncode == 0 or not named:
            failures.append(f"{chart} {' '.join(args)}: want a refusal naming {path}, got "
                            f"exit {result.returncode}: {result.stderr.strip()[:600]}")
    for chart, args, message in REFUSED:
        if chart not in SELECTED:
            continue
        result = helm("template", "x", str(CHARTS / chart), *args)
        if result.returncode == 0 or message not in result.stderr:
            failures.append(f"{chart} {' '.join(args)}: want a refusal saying {message!r}, got "
                            f"exit {result.returncode}: {result.stderr.strip()[:600]}")


def fold_crds(text):
    """A render's CRDs (crds.enabled) are the files of deploy/crds, which check_crds_packaged
    compares whole: the golden file keeps their metadata and names the file for the rest."""
    docs = text.split("\n---\n")
    for i, doc in enumerate(docs):
        if "\nkind: CustomResourceDefinition\n" not in doc:
            continue
        head = doc.split("\nspec:\n", 1)[0]
        plural, group = re.search(r"^  name: (\S+)$", head, re.M).group(1).split(".", 1)
        docs[i] = f"{head}\nspec: <deploy/crds/{group}_{plural}.yaml>\n"
    return "\n---\n".join(docs)


def check_crds_packaged(failures):
    """The seven CRDs live once, in the slurm-operator-crds chart's files/: its template renders
    them for `helm upgrade` to update (a crds/ folder Helm installs once and never upgrades), and
    kept on uninstall. The operator chart carries that chart (crds.enabled), which also installs
    alone from deploy/helm/slurm-operator-crds; deploy/crds links to each file."""
    want_names = sorted([f"{p}.slinky.slurm.net" for p in
                         ("accountings", "controllers", "loginsets", "nodesets", "restapis", "tokens")] +
                        ["healthchecks.tightrope.slurm.net"])
    if (CHARTS / "slurm-operator" / "crds").exists():
        failures.append("deploy/helm/slurm-operator/crds exists: Helm would install it and never "
                        "upgrade it, and the templated CRDs would clash with it")
    standalone = CHARTS / "slurm-operator-crds"
    if not standalone.is_symlink() or standalone.resolve() != CRD_CHART.resolve():
        failures.append(f"deploy/helm/slurm-operator-crds is not a link to {CRD_CHART.relative_to(ROOT)}")
    # deploy/crds holds one link per CRD file (a linked directory would break
    # `kubectl apply -f deploy/crds`, which does not enter a link given without a slash).
    files = sorted(p.name for p in CRD_FILES.glob("*.yaml"))
    links = ROOT / "deploy" / "crds"
    linked = sorted(p.name for p in links.iterdir())
    if linked != files:
        failures.append(f"deploy/crds holds {linked}, want links to each of {files}")
    for name in linked:
        link = links / name
        target = CRD_FILES / name
        if not link.is_symlink() or link.resolve() != target.resolve():
            failures.append(f"deploy/crds/{name} is not a link to {target.relative_to(ROOT)}")
    try:
        import yaml
    except ImportError:
        print("note: PyYAML missing (Debian: python3-yaml): rendered CRDs not compared with their files")
        return
    want = {}
    for f in sorted(CRD_FILES.glob("*.yaml")):
        doc = next(d for d in yaml.safe_load_all(f.read_text()) if d)
        want[doc["metadata"]["name"]] = doc
    if sorted(want) != want_names:
        failures.append(f"{CRD_FILES.relative_to(ROOT)}: CRDs {sorted(want)}, want {want_names}")

    def crds(chart, args):
        out = render(chart, "slurm-operator", "slinky", args)
        return {d["metadata"]["name"]: d for d in yaml.safe_load_all(out)
                if d and d.get("kind") == "CustomResourceDefinition"}

    for chart, args in (("slurm-operator", []), ("slurm-operator", ["--set", "crds.enabled=true"]),
                        ("slurm-operator-crds", [])):
        got = crds(chart, args)
        where = f"helm template {chart} {' '.join(args)}".strip()
        if sorted(got) != want_names:
            failures.append(f"{where}: CRDs {sorted(got)}, want {want_names}")
        for name, doc in got.items():
            annotations = dict(doc["metadata"].get("annotations") or {})
            if annotations.pop("helm.sh/resource-policy", None) != "keep":
                failures.append(f"{where}: CRD {name} lacks helm.sh/resource-policy: keep")
            bare = {**doc, "metadata": {**doc["metadata"], "annotations": annotations}}
            if not annotations:
                del bare["metadata"]["annotations"]
            if name in want and bare != want[name]:
                failures.append(f"{where}: CRD {name} differs from its file in {CRD_FILES.name}/")
    if crds("slurm-operator", ["--set", "crds.enabled=false"]):
        failures.append("helm template slurm-operator --set crds.enabled=false: CRDs rendered")


def check_crds_left_alone(failures):
    """Which live CRDs the slurm-operator-crds chart leaves alone, decided by its own helper
    (_helpers.tpl, heldByOwner) on the objects lookup could return: helm template cannot look
    up, so a throwaway chart feeds it each case."""
    import tempfile
    cases = {
        "absent": ({}, ""),
        "ours": ({"metadata": {"annotations": {"meta.helm.sh/release-name": "ops",
                                               "meta.helm.sh/release-namespace": "slinky"}}}, ""),
        "same name, other namespace": ({"metadata": {"annotations": {
            "meta.helm.sh/release-name": "ops", "meta.helm.sh/release-namespace": "other"}}},
            "release ops in other"),
        "Slinky's crds chart": ({"metadata": {"annotations": {
            "meta.helm.sh/release-name": "slurm-operator-crds",
            "meta.helm.sh/release-namespace": "default"}}}, "release slurm-operator-crds in default"),
        "kubectl apply": ({"metadata": {"name": "nodesets.slinky.slurm.net"}}, "no Helm release"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "probe"
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
        (chart / "templates" / "_helpers.tpl").write_text(
            (CRD_CHART / "templates" / "_helpers.tpl").read_text())
        (chart / "templates" / "probe.yaml").write_text(
            "{{- range $i, $live := .Values.lives }}\n"
            "{{ printf \"c%d\" $i }}: {{ include \"slurm-operator-crds.heldByOwner\" "
            "(dict \"root\" $ \"live\" $live) | quote }}\n{{- end }}\n")
        import json
        values = Path(tmp) / "values.json"
        values.write_text(json.dumps({"lives": [live for live, _ in cases.values()]}))
        result = helm("template", "ops", str(chart), "--namespace", "slinky", "--values", str(values))
    if result.returncode != 0:
        failures.append(f"CRD ownership probe: {result.stderr.strip()[:600]}")
        return
    got = dict(re.findall(r'^c(\d+): "(.*)"$', result.stdout, re.M))
    for i, (case, (_, want)) in enumerate(cases.items()):
        if got.get(str(i)) != want:
            failures.append(f"slurm-operator-crds with a live CRD ({case}): leaves it to "
                            f"{got.get(str(i))!r}, want {want!r} ('' = manages it)")


# --- rendered custom resources against their CRD's OpenAPI schema ------------------------

def schema_errors(value, schema, path):
    """The structural checks an API server makes: types, enums, known fields, required fields,
    minimum. Not CEL, not formats."""
    errors = []
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(f"{path}: want an integer or a string")
        return errors
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool,
             "integer": int, "number": (int, float)}
    if kind in types:
        ok = isinstance(value, types[kind])
        if kind in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            return [f"{path}: want {kind}, got {type(value).__name__} {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append(f"{path}: {value} below {schema['minimum']}")
    if isinstance(value, dict):
        props = schema.get("properties")
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{path}: {req} is required")
        for k, v in value.items():
            if props is not None and k in props:
                errors += schema_errors(v, props[k], f"{path}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += schema_errors(v, schema["additionalProperties"], f"{path}.{k}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{k}: unknown field")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


def check_crs_fit_crds(failures):
    try:
        import yaml
    except ImportError:
        print("note: PyYAML missing (Debian: python3-yaml): rendered resources not checked "
              "against the CRDs")
        return
    schemas = {}
    for crd_file in sorted(CRD_FILES.glob("*.yaml")):
        for doc in yaml.safe_load_all(crd_file.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                kind = doc["spec"]["names"]["kind"]
                for version in doc["spec"]["versions"]:
                    schemas[(f"{doc['spec']['group']}/{version['name']}", kind)] = \
                        version["schema"]["openAPIV3Schema"]
    for name, chart, _, _, _, _ in CASES:
        if chart != "slurm":
            continue
        seen = 0
        for doc in yaml.safe_load_all((GOLDEN / f"{name}.yaml").read_text()):
            if doc and doc.get("kind") in ("Secret", "ConfigMap"):
                for field in ("data", "stringData"):
                    for key, value in (doc.get(field) or {}).items():
                        if not value:
                            failures.append(f"{name}: {doc['kind']} {doc['metadata']['name']} "
                                            f"has {field}.{key} empty")
            if not doc or not doc.get("apiVersion", "").startswith("slinky.slurm.net/"):
                continue
            seen += 1
            schema = schemas.get((doc["apiVersion"], doc["kind"]))
            where = f"{name}: {doc['kind']} {doc['metadata']['name']}"
            if schema is None:
                failures.append(f"{where}: no CRD serves {doc['apiVersion']} {doc['kind']}")
                continue
            body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
            for error in schema_errors(body, {**schema, "properties": {
                    k: v for k, v in schema.get("properties", {}).items()
                    if k not in ("apiVersion", "kind", "metadata")}}, ""):
                failures.append(f"{where}: {error.lstrip('.')}")
        if seen == 0:
            failures.append(f"{name}: no slinky.slurm.net resource rendered")


# --- a Slinky user's values: what each key turns into ----------------------------------------

def rendered(name):
    import yaml
    docs = [d for d in yaml.safe_load_all((GOLDEN / f"{name}.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def check_slinky_values(failures):
    """values/slurm-slinky.yaml holds the keys of Slinky's slurm chart; each must show in the
    objects with the meaning it has there."""
    try:
        objs = rendered("slurm-slinky")
    except ImportError:
        return
    fails = []

    def want(cond, what):
        if not cond:
            fails.append(f"slurm-slinky: {what}")

    def get(kind, name):
        obj = objs.get((kind, name))
        want(obj is not None, f"no {kind} {name}; rendered: {sorted(objs)}")
        return obj or {}

    ctl = get("Controller", "hpc-slurm")
    spec = ctl.get("spec", {})
    want(ctl.get("metadata", {}).get("namespace") == "hpc-prod", "namespaceOverride: the Controller's namespace")
    want(spec.get("slurmKeyRef") == {"name": "hpc-slurm-auth-slurm", "key": "slurm.key"},
         f"slurmKey.create: Slinky's Secret name, got {spec.get('slurmKeyRef')}")
    want(spec.get("jwtKeyRef") == {"name": "site-jwt", "key": "hs256.key"}, "jwtKey.secretRef")
    want(spec.get("jwksKeyRef") == {"name": "hpc-slurm-auth-jwks", "key": "jwks.json"}, "jwksKeys.enabled")
    want(("Secret", "site-jwt") not in objs and ("Secret", "hpc-slurm-auth-jwt") not in objs,
         "jwtKey.secretRef: the user's Secret is not made")
    key = get("Secret", "hpc-slurm-auth-slurm")
    want(key.get("metadata", {}).get("annotations", {}).get("backup.example.org/include") == "true",
         "slurmKey.annotations")
    want(spec.get("ha") == {"enabled": True, "backups": 2}, "controller.ha")
    want(spec.get("persistence", {}).get("storageClassName") == "", "persistence.storageClassName \"-\": no class")
    want(spec.get("logfile", {}).get("image", "").endswith("@sha256:" + "0123456789abcdef" * 4), "image digest")
    want(spec.get("slurmctld", {}).get("image") == "localhost/tightrope/slurmctld:26.05", "image as a string")
    want(spec.get("slurmctld", {}).get("imagePullPolicy") == "Always", "imagePullPolicy")
    conf = spec.get("extraConf", "").splitlines()
    want("SchedulerParameters=bf_continue,bf_interval=60" in conf and "GresTypes=gpu" in conf,
         f"controller.extraConfMap, got {conf}")
    want(not any(line.startswith("PriorityType") for line in conf), "extraConfMap: a null value is left out")
    want("PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED" in conf, "partitions.all.configMap")
    want("PartitionName=batch Nodes=cpu,gpu State=UP MaxTime=7-00:00:00" in conf, "partitions.batch.config")
    want(not any("unused" in line for line in conf), "a partition without enabled: true is not made")
    names = lambda field: [r["name"] for r in spec.get(field, [])]
    want(names("prologScriptRefs") == ["hpc-slurm-prolog-scripts", "hpc-slurm-prolog-dcgm", "site-prologs"],
         f"prologScripts, vendor.nvidia.dcgm and prologScriptRefs, got {names('prologScriptRefs')}")
    want(names("epilogScriptRefs") == ["hpc-slurm-epilog-dcgm", "site-epilogs"], "epilogScriptRefs")
    want(names("prologSlurmctldScriptRefs") == ["hpc-slurm-prolog-slurmctld-scripts"], "prologSlurmctldScripts")
    want(names("epilogSlurmctldScriptRefs") == ["site-ctld-epilogs"], "epilogSlurmctldScriptRefs")
    want(names("configFileRefs") == ["hpc-slurm-config-extra"], "configFiles")
    pod = spec.get("template", {}).get("spec", {})
    want(pod.get("priorityClassName") == "slurm-critical", "priorityClass.enabled: every pod's class")
    want(pod.get("imagePullSecrets") == [{"name": "site-pull"}], "imagePullSecrets")
    want(pod.get("tolerations") == [{"key": "hpc", "operator": "Exists"}], "controller.podSpec")
    pc = get("PriorityClass", "slurm-critical")
    want(pc.get("value") == 900000000 and pc.get("preemptionPolicy") == "Never" and
         pc.get("description") == "Slurm daemons", "priorityClass.create")
    prolog = get("ConfigMap", "hpc-slurm-prolog-scripts").get("data", {})
    want(list(prolog) == ["prolog-10-health.sh"], f"prolog scripts keyed as Slinky keys them, got {list(prolog)}")
    dcgm = get("ConfigMap", "hpc-slurm-prolog-dcgm").get("data", {})
    want(list(dcgm) == ["prolog-80-dcgm.sh"] and 'dir="/run/dcgm/job-mapping"' in dcgm.get("prolog-80-dcgm.sh", ""),
         "vendor.nvidia.dcgm.jobMappingDir and scriptPriority")

    acct = get("Accounting", "hpc-slurm").get("spec", {})
    want(acct.get("extraConf", "").strip() == "PurgeJobAfter=12month", "accounting.extraConfMap")
    rest = get("RestApi", "hpc-slurm").get("spec", {})
    want(rest.get("replicas") == 2, "restapi.replicas")
    want(rest.get("slurmrestd", {}).get("env") == [{"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_files"}],
         "restapi.slurmrestd.env")
    pdb = get("PodDisruptionBudget", "hpc-slurm-restapi").get("spec", {})
    want(pdb.get("minAvailable") == 1 and "maxUnavailable" not in pdb, "restapi.pdb")
    want(pdb.get("selector", {}).get("matchLabels") == {"app.kubernetes.io/name": "slurmrestd",
                                                        "app.kubernetes.io/instance": "hpc-slurm"},
         "restapi.pdb selects the operator's slurmrestd pods")

    login = get("LoginSet", "hpc-slurm-login-users").get("spec", {})
    want(login.get("replicas") == 2, "loginsets.users.replicas")
    want(login.get("login", {}).get("securityContext") == {"privileged": False}, "loginsetDefaults.login merged")
    want(login.get("service", {}).get("spec", {}).get("type") == "LoadBalancer", "loginsetDefaults.service")
    want(login.get("sssdConfRef") == {"name": "site-sssd", "key": "sssd.conf"}, "sssd.secretRef")
    want(("Secret", "hpc-slurm-sssd-conf") not in objs, "sssd.secretRef: no sssd Secret made")

    cpu = get("NodeSet", "hpc-slurm-worker-cpu").get("spec", {})
    want(cpu.get("replicas") == 3, "nodesets.cpu.replicas")
    want(cpu.get("extraConf") == "Features=cpu,avx512 Weight=10", f"nodesets.extraConfMap, got {cpu.get('extraConf')}")
    want(cpu.get("partition") == {"enabled": True, "config": "State=UP"}, "nodesetDefaults.partition.configMap")
    want(cpu.get("ssh", {}).get("sssdConfRef") == {"name": "site-sssd", "key": "sssd.conf"},
         "ssh.enabled: the sssd.conf Slinky injects")
    gpu = get("NodeSet", "hpc-slurm-worker-gpu").get("spec", {})
    want(gpu.get("slurmd", {}).get("image") == "localhost/tightrope/slurmd:26.05",
         "a NodeSet with only replicas and podSpec takes nodesetDefaults' slurmd")
    want(gpu.get("template", {}).get("spec", {}).get("hostname") == "gpu-", "the Slurm node names")
    want({"name": "dcgm-job-mapping", "mountPath": "/run/dcgm/job-mapping"} in gpu.get("slurmd", {}).get("volumeMounts", []),
         "vendor.nvidia.dcgm: the GPU NodeSet mounts the job mapping directory")
    want(not cpu.get("slurmd", {}).get("volumeMounts"), "vendor.nvidia.dcgm: a CPU NodeSet mounts nothing")
    want(("NodeSet", "hpc-slurm-worker-old") not in objs, "nodesets.old.enabled: false")
    want(("ConfigMap", "hpc-site-notes") in objs, "extraObjects, rendered with tpl")
    failures += fails


def check_nulls(failures):
    """A null in the values drops the chart's default, as in helm's own merge (Slinky's tests
    write both): a partition's `config: null` beside its configMap takes the configMap, and a
    NodeSet's `partition: null` is a NodeSet without spec.partition."""
    try:
        import yaml
    except ImportError:
        return
    out = render("slurm", "slurm", "slurm", [
        "--set", "nodesets.cpu.replicas=1", "--set", "nodesets.cpu.partition=null",
        "--set", "partitions.batch.enabled=true", "--set", "partitions.batch.nodesets={cpu}",
        "--set", "partitions.batch.config=null", "--set", "partitions.batch.configMap.State=UP"])
    objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    conf = objs[("Controller", "slurm")]["spec"].get("extraConf", "").splitlines()
    if "PartitionName=batch Nodes=cpu State=UP" not in conf:
        failures.append(f"partitions.batch.config: null: want its configMap's line, got {conf}")
    if "partition" in objs[("NodeSet", "slurm-worker-cpu")]["spec"]:
        failures.append("nodesets.cpu.partition: null: want no spec.partition")


def check_notes(failures):
    """Unknown keys are named in NOTES.txt, never refused."""
    result = helm("install", "x", str(CHARTS / "slurm"), "--dry-run=client", "--namespace", "slurm",
                  "--set", "controller.legacyThing=1", "--set", "nodesets.a.oldKey=2",
                  "--set", "vendor.google.a3mega[0].targetNodeSet=a",
                  "--set", "vendor.google.a3mega[0].networks={" + ",".join(f"vpc{i}" for i in range(9)) + "}")
    if result.returncode != 0:
        failures.append(f"slurm with unknown keys: want an install, got {result.stderr.strip()[:600]}")
        return
    for part in ("controller.legacyThing", "nodesets.a.oldKey", "vendor.google.a3mega"):
        if part not in result.stdout:
            failures.append(f"slurm NOTES.txt does not name {part}:\n{result.stdout[-1500:]}")


# --- the operator chart: what Slinky's keys turn into ---------------------------------------

class Rendered(dict):
    """The objects of one render by (kind, name); .docs keeps them all (RoleBindings of one
    name in several namespaces)."""

    def __init__(self, docs):
        super().__init__(((d["kind"], d["metadata"]["name"]), d) for d in docs)
        self.docs = docs


def operator_objects(args, release="slurm-operator", namespace="slinky"):
    import yaml
    out = render("slurm-operator", release, namespace, args)
    return Rendered([d for d in yaml.safe_load_all(out) if d])


def pod_of(objs, name):
    return objs.get(("Deployment", name), {}).get("spec", {}).get("template", {}).get("spec", {})


def container_of(objs, name):
    return (pod_of(objs, name).get("containers") or [{}])[0]


class Expect:
    """Collects failed expectations under one case name."""

    def __init__(self, name, failures):
        self.name, self.failures = name, failures

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(f"{self.name}: {what}")
        return cond

    def equal(self, got, want, what):
        return self(got == want, f"{what}: got {got!r}, want {want!r}")


def check_component(want, objs, name, c, component, values):
    """The keys the operator and the webhook share (c: the values of operator or webhook):
    replicas, pull policy, service account, placement, pull secrets. Returns its pod and
    container."""
    want.equal(objs.get(("Deployment", name), {}).get("spec", {}).get("replicas"), c["replicas"],
               f"{component}.replicas")
    pod, ctr = pod_of(objs, name), container_of(objs, name)
    want.equal(ctr.get("imagePullPolicy"), c["imagePullPolicy"], f"{component}.imagePullPolicy")
    want.equal(pod.get("serviceAccountName"), c["serviceAccount"]["name"], f"{component}.serviceAccount.name")
    want(("ServiceAccount", c["serviceAccount"]["name"]) not in objs, f"{component}.serviceAccount.create: false")
    for key in ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints"):
        want.equal(pod.get(key), c[key], f"{component}.{key}")
    want.equal(pod.get("imagePullSecrets"), values["imagePullSecrets"], f"imagePullSecrets ({component})")
    return pod, ctr


def check_operator_slinky_values(failures):
    """values/operator-slinky.yaml sets every key of Slinky's slurm-operator chart; each must
    show in the objects with the meaning it has there."""
    try:
        import yaml
    except ImportError:
        return
    values = yaml.safe_load((VALUES / "operator-slinky.yaml").read_text())
    op, wh = values["operator"], values["webhook"]
    objs = operator_objects(["--values", str(VALUES / "operator-slinky.yaml")])
    want = Expect("operator-slinky", failures)
    name, hook, ns = "site-slurm-operator", "site-slurm-operator-webhook", "hpc-system"

    for obj in objs.docs:
        kind, obj_name = obj["kind"], obj["metadata"]["name"]
        if kind not in ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                        "MutatingWebhookConfiguration") \
                and (kind, obj_name) != ("RoleBinding", name) and obj_name != "site-notes":
            want.equal(obj["metadata"].get("namespace"), ns, f"namespaceOverride: {kind} {obj_name}")
    want(not any(k == "CustomResourceDefinition" for k, _ in objs), "crds.enabled: false renders no CRD")

    # The operator.
    pod, ctr = check_component(want, objs, name, op, "operator", values)
    want.equal(ctr.get("image"), f"{op['image']['repository']}@{op['image']['digest']}",
               "operator.image: the digest wins over the tag")
    want.equal(pod.get("priorityClassName"), values["priorityClassName"], "priorityClassName")
    want.equal(pod.get("securityContext", {}).get("fsGroup"), 2000, "operator.podSecurityContext")
    want.equal(ctr.get("securityContext", {}).get("runAsUser"), 1001, "operator.securityContext")
    want.equal(ctr.get("resources"), op["resources"], "operator.resources")
    args = ctr.get("args", [])
    for kind in ("accounting", "controller", "loginset", "nodeset", "restapi", "token"):
        want(f"--{kind}-workers={op[kind + 'Workers']}" in args, f"operator.{kind}Workers, args {args}")
    want(not any("slurmclient" in a for a in args), "operator.slurmclientWorkers: no flag")
    want("--propagated-node-conditions=KubeletUnhealthy" in args, f"propagatedNodeConditions, args {args}")
    want("--drain-on-node-conditions" not in args, "propagatedNodeConditions name a cordon's drain, as Slinky's")
    for arg, key in (("--log-level=debug", "logLevel 3 (zap: more verbose than info)"),
                     ("--health-addr=:9081", "healthPort"), ("--metrics-addr=:9080", "metricsPort"),
                     ("--leader-elect", "leaderElection"), ("--namespaces=slurm,hpc", "namespaces")):
        want(arg in args, f"operator.{key}: want {arg} in {args}")
    bound = sorted(d["metadata"]["namespace"] for d in objs.docs
                   if d["kind"] == "RoleBinding" and d["metadata"]["name"] == name)
    want.equal(bound, ["hpc", "slurm"], "operator.namespaces: a RoleBinding in each")
    want(("ClusterRoleBinding", name) not in objs, "operator.namespaces: no cluster-wide binding")
    pdb = objs.get(("PodDisruptionBudget", name), {}).get("spec", {})
    want(pdb.get("maxUnavailable") == 1 and "minAvailable" not in pdb,
         f"operator.pdb: maxUnavailable wins over minAvailable, got {pdb}")

    # The webhook.
    pod, ctr = check_component(want, objs, hook, wh, "webhook", values)
    want.equal(ctr.get("image"), f"{wh['image']['repository']}:{wh['image']['tag']}", "webhook.image")
    want(pod.get("securityContext", {}).get("runAsUser") == 2000 and
         pod["securityContext"].get("runAsGroup") == 2000, "webhook.podSecurityContext")
    want.equal(ctr.get("securityContext", {}).get("privileged"), False, "webhook.securityContext")
    want.equal(ctr.get("resources", {}).get("requests"), wh["resources"]["requests"], "webhook.resources")
    args = ctr.get("args", [])
    want("--server-addr=:10443" in args and ctr.get("ports", [{}])[0].get("containerPort") == 10443,
         f"webhook.serverPort, args {args}")
    want("--log-level=error" in args, f"webhook.logLevel, args {args}")
    want.equal([v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v],
               [values["certManager"]["secretName"]], "certManager.secretName: the mounted Secret")
    pdb = objs.get(("PodDisruptionBudget", hook), {}).get("spec", {})
    want.equal(pdb.get("minAvailable"), "50%", "webhook.pdb.minAvailable")
    vwc = objs.get(("ValidatingWebhookConfiguration", hook), {})
    want.equal(vwc.get("metadata", {}).get("annotations", {}).get("cert-manager.io/inject-ca-from"),
               f"{ns}/site-webhook-tls", "certManager.enabled: the caBundle injected by cert-manager")
    hooks = vwc.get("webhooks", [])
    want.equal(len(hooks), 7, "seven validating webhooks (Slinky's six kinds and HealthCheck)")
    for h in hooks:
        want("caBundle" not in h.get("clientConfig", {}), f"{h['name']}: no caBundle of the chart's own")
        want.equal(h.get("failurePolicy"), "Ignore", f"{h['name']}: webhook.validating.failurePolicy")
        want.equal(h.get("matchPolicy"), "Exact", f"{h['name']}: webhook.validating.matchPolicy")
        want.equal(h.get("matchConditions"), wh["validating"]["matchConditions"],
                   f"{h['name']}: webhook.validating.matchConditions")
        want.equal(h.get("timeoutSeconds"), wh["timeoutSeconds"], f"{h['name']}: webhook.timeoutSeconds")
        want.equal(h.get("namespaceSelector", {}).get("matchExpressions", [{}])[0],
                   {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["slurm", "hpc"]},
                   f"{h['name']}: webhook.namespaces")
    mutating = [o for (k, _), o in objs.items() if k == "MutatingWebhookConfiguration"]
    want(len(mutating) == 1, "webhook.podsBinding: a MutatingWebhookConfiguration")
    for m in mutating:
        binding = m["webhooks"][0]
        want(binding["rules"][0]["resources"] == ["pods/binding"] and
             binding["clientConfig"]["service"]["path"] == "/mutate--v1-binding" and
             binding["sideEffects"] == "NoneOnDryRun",
             f"webhook.podsBinding: pods/binding to /mutate--v1-binding, got {binding}")
    webhook_args = [a for (k, _), o in objs.items() if k == "Deployment"
                    for c in o["spec"]["template"]["spec"]["containers"] for a in c.get("args", [])]
    want("--pods-binding" in webhook_args, "webhook.podsBinding: the webhook serves the binding path")
    want(("Secret", "site-webhook-tls") not in objs, "certManager.enabled: the chart makes no Secret")

    # cert-manager's chain: serving Certificate <- CA Issuer <- CA Certificate <- self-signed Issuer.
    serving = objs.get(("Certificate", "site-webhook-tls"), {}).get("spec", {})
    cm = values["certManager"]
    want(serving.get("secretName") == cm["secretName"] and serving.get("duration") == cm["duration"]
         and serving.get("renewBefore") == cm["renewBefore"], f"certManager: the serving Certificate, got {serving}")
    want(f"{hook}.{ns}.svc" in serving.get("dnsNames", []), f"the Certificate names the Service, got {serving}")
    ca_issuer = objs.get(("Issuer", serving.get("issuerRef", {}).get("name")), {}).get("spec", {})
    ca = objs.get(("Certificate", ca_issuer.get("ca", {}).get("secretName")), {}).get("spec", {})
    want(ca.get("isCA") is True, f"the serving Certificate's Issuer signs with a CA Certificate, got {ca_issuer}")
    root = objs.get(("Issuer", ca.get("issuerRef", {}).get("name")), {}).get("spec", {})
    want("selfSigned" in root, f"the CA Certificate comes from a self-signed Issuer, got {root}")

    extra = objs.get(("ConfigMap", "site-notes"), {})
    want(extra.get("metadata", {}).get("namespace") == "slinky" and
         extra.get("data", {}).get("release") == "slurm-operator", "extraObjects, rendered with tpl")

    # operator.enabled: false (values/operator-webhook-only.yaml): the webhook alone.
    objs = operator_objects(["--values", str(VALUES / "operator-webhook-only.yaml")])
    want = Expect("operator-webhook-only", failures)
    want(not any(k in (("Deployment", "slurm-operator"), ("ServiceAccount", "slurm-operator"),
                       ("ClusterRole", "slurm-operator"), ("ClusterRole", "slurm-operator-nodes"))
                 for k in objs), f"operator.enabled: false leaves no operator object, got {sorted(objs)}")
    hook = "slurm-operator-webhook"
    want.equal(pod_of(objs, hook).get("serviceAccountName"), "default",
               "webhook.serviceAccount.create: false without a name")
    want(("ServiceAccount", hook) not in objs, "webhook.serviceAccount.create: false makes none")
    want.equal(container_of(objs, hook).get("image"), "localhost/site/slurm-operator:1.2.1",
               "webhook.image as one string")
    for h in objs.get(("ValidatingWebhookConfiguration", hook), {}).get("webhooks", []):
        want.equal(h.get("namespaceSelector"), {"matchLabels": {"slinky.slurm.net/validate": "true"}},
                   f"{h['name']}: webhook.validating.namespaceSelector, verbatim")


def check_operator_precedence(failures):
    """Where Slinky and Tightrope name the same thing, Tightrope's key keeps working and
    Slinky's per-component key wins when set."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        return
    want = Expect("operator precedence", failures)
    op, hook = "slurm-operator", "slurm-operator-webhook"

    def objs(*args):
        return operator_objects(list(args))

    o = objs()
    want.equal(o[("Deployment", op)]["spec"]["replicas"], 2, "two operators by default")
    want.equal(pod_of(o, op)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
               ["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname", "the two asked to spread over Nodes")
    o = objs("--set", "operator.affinity.nodeAffinity.x=y")
    want.equal(pod_of(o, op)["affinity"], {"nodeAffinity": {"x": "y"}}, "a given affinity replaces the spread")
    o = objs("--set", "operator.leaderElection=false")
    want.equal(o[("Deployment", op)]["spec"]["replicas"], 1, "without leader election one operator")
    want("affinity" not in pod_of(o, op), "one operator: nothing to spread")
    want("--leader-elect" not in container_of(o, op).get("args", []), "operator.leaderElection: false over leaderElection")
    want(("Role", f"{op}-leader-election") not in o, "operator.leaderElection: false: no Lease role")
    want.equal(objs("--set", "operator.replicas=0")[("Deployment", op)]["spec"]["replicas"], 0,
               "operator.replicas: 0 is a value, not unset")
    want("--drain-on-node-conditions" in container_of(objs("--set", "operator.drainOnNodeConditions=true"), op)
         .get("args", []), "operator.drainOnNodeConditions")
    o = objs("--set", "nodeSelector.zone=a", "--set", "operator.nodeSelector.role=ops")
    want.equal(pod_of(o, op).get("nodeSelector"), {"role": "ops"}, "operator.nodeSelector over nodeSelector")
    want.equal(pod_of(o, hook).get("nodeSelector"), {"zone": "a"}, "nodeSelector for the webhook")
    o = objs("--set", "serviceAccount.name=legacy", "--set", "operator.serviceAccount.name=slinky-sa")
    want.equal(pod_of(o, op).get("serviceAccountName"), "slinky-sa", "operator.serviceAccount.name")
    want(("ServiceAccount", "slinky-sa") in o, "the ServiceAccount made under Slinky's name")
    want.equal(pod_of(objs("--set", "serviceAccount.name=legacy"), op).get("serviceAccountName"),
               "legacy", "serviceAccount.name alone")
    o = objs("--set", "image.tag=v9", "--set", "operator.image.repository=localhost/x/op")
    want.equal([container_of(o, n).get("image") for n in (op, hook)], ["localhost/x/op:v9"] * 2,
               "operator.image over image, and the webhook runs the operator's image")
    o = objs("--set", "imagePullPolicy=Always")
    want.equal([container_of(o, n).get("imagePullPolicy") for n in (op, hook)], ["Always"] * 2,
               "imagePullPolicy over image.pullPolicy")
    o = objs("--set", "operator.image.repository=registry.example.org/slinkyproject/slurm-operator",
             "--set", "operator.image.tag=1.2.1", "--set-string",
             "webhook.image=registry.example.org/slinkyproject/slurm-operator-webhook:1.2.1")
    want.equal([container_of(o, n).get("image") for n in (op, hook)],
               ["localhost/tightrope/slurm-operator:dev"] * 2, "Slinky's own images are passed over")
    want("--server-addr=:8443" in container_of(objs("--set", "webhook.port=8443"), hook).get("args", []),
         "webhook.port alone")
    o = objs("--set", "webhook.port=8443", "--set", "webhook.serverPort=10443")
    want("--server-addr=:10443" in container_of(o, hook).get("args", []), "webhook.serverPort over webhook.port")
    o = objs("--set", "webhook.failurePolicy=Ignore")
    want.equal({h["failurePolicy"] for h in o[("ValidatingWebhookConfiguration", hook)]["webhooks"]},
               {"Ignore"}, "webhook.failurePolicy alone")
    o = objs("--set", "webhook.failurePolicy=Ignore", "--set", "webhook.validating.failurePolicy=Fail")
    want.equal({h["failurePolicy"] for h in o[("ValidatingWebhookConfiguration", hook)]["webhooks"]},
               {"Fail"}, "webhook.validating.failurePolicy over webhook.failurePolicy")
    o = objs("--set", "operator.logLevel=panic", "--set-string", "webhook.logLevel=2")
    want("--log-level=error" in container_of(o, op).get("args", []), "zap's panic: error")
    want("--log-level=debug" in container_of(o, hook).get("args", []), "zap's level 2: debug")
    listed = render("slurm-operator", "x", "slinky", ["--set", "operator.namespaces={slurm,hpc}"])
    joined = render("slurm-operator", "x", "slinky", ["--set-string", "operator.namespaces=slurm\\,hpc"])
    strip = lambda text: "\n".join(line for line in text.splitlines()
                                   if not GENERATED_LINE.match(line))
    want(strip(listed) == strip(joined), "operator.namespaces: a list and a comma-separated string agree")


def check_operator_notes(failures):
    """Unknown keys install and are named in NOTES.txt; the chart's own keys (values.yaml, the
    list NOTES.txt keeps) are not; Slinky keys without effect here are named as such."""
    result = helm("install", "x", str(CHARTS / "slurm-operator"), "--dry-run=client", "--namespace", "slinky",
                  "--set", "futureKey=1", "--set", "operator.newThing=2", "--set", "operator.profile=true")
    if result.returncode != 0:
        failures.append(f"slurm-operator with unknown keys: want an install, got {result.stderr.strip()[:600]}")
    else:
        notes = result.stdout.split("\nNOTES:\n", 1)[-1]
        for part in ("futureKey", "operator.newThing", "WARNING: operator.profile"):
            if part not in notes:
                failures.append(f"slurm-operator NOTES.txt does not name {part}:\n{notes[-1500:]}")
    result = helm("install", "x", str(CHARTS / "slurm-operator"), "--dry-run=client", "--namespace", "slinky")
    if result.returncode != 0 or "WARNING" in result.stdout:
        failures.append(f"slurm-operator defaults: want an install without warnings, got "
                        f"{(result.stderr or result.stdout).strip()[-800:]}")
    try:
        import yaml
    except ImportError:
        return
    values = yaml.safe_load((CHARTS / "slurm-operator" / "values.yaml").read_text())
    helpers = (CHARTS / "slurm-operator" / "templates" / "_helpers.tpl").read_text()
    listed = yaml.safe_load(re.search(r'define "slurm-operator.knownKeys" -}}\n(.*?)\n\{\{- end',
                                      helpers, re.S).group(1))
    want = {"": sorted([*values, "global", "slurm-operator-crds"]),
            **{c: sorted(values[c]) for c in ("operator", "webhook", "certManager", "monitoring")}}
    if {k: sorted(v) for k, v in listed.items()} != want:
        failures.append(f"_helpers.tpl slurm-operator.knownKeys {listed} is not the keys of values.yaml {want}")


ALERTS = {"SlurmctldDown", "SlurmUnreachableFromOperator", "SlurmNodesNotResponding", "SlurmNodeDrainStuck",
          "NodeSetScaleInBlocked", "HealthCheckBudgetExhausted", "SlurmRestErrors", "SlurmdbdBacklog", "SlurmOperatorNotLeading", "SlurmOperatorAbsent",
          "SlurmOperatorReconcileErrors", "SlurmOperatorWebhookCertificateExpiring"}


def check_operator_monitoring(failures):
    """monitoring.*: the PrometheusRule holds every alert, each with a severity and a summary,
    and promtool accepts its groups; each dashboard is a ConfigMap of valid JSON whose panels all
    query; the operator's and the webhook's ServiceMonitors are there. Nothing without the CRDs."""
    import tempfile
    try:
        import yaml
    except ImportError:
        return
    sets = ["--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.dashboards.enabled=true",
            "--set", "operator.serviceMonitor.enabled=true"]
    apis = ["--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
            "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"]
    docs = [d for d in yaml.safe_load_all(render("slurm-operator", "slurm-operator", "slinky", sets + apis)) if d]
    rules = [d for d in docs if d["kind"] == "PrometheusRule"]
    if len(rules) != 1:
        failures.append(f"monitoring: want one PrometheusRule, got {len(rules)}")
        return
    groups = rules[0]["spec"]["groups"]
    alerts = {r["alert"]: r for g in groups for r in g["rules"]}
    if set(alerts) != ALERTS:
        failures.append(f"monitoring: alerts {sorted(alerts)}, want {sorted(ALERTS)}")
    for name, r in alerts.items():
        if r.get("labels", {}).get("severity") not in ("critical", "warning") or not r.get("annotations", {}).get(
                "summary"):
            failures.append(f"monitoring: alert {name} lacks a severity or a summary")
    if shutil.which("promtool"):
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            f.write(yaml.safe_dump({"groups": groups}))
            f.flush()
            check = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
            if check.returncode != 0:
                failures.append(f"monitoring: promtool check rules:\n{check.stdout}{check.stderr}")
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get(
        "grafana_dashboard") == "1"]
    if not dashboards:
        failures.append("monitoring: no dashboard ConfigMap labelled grafana_dashboard=1")
    for cm in dashboards:
        for key, text in cm["data"].items():
            try:
                dashboard = json.loads(text)
            except ValueError as e:
                failures.append(f"monitoring: {cm['metadata']['name']}/{key} is not JSON: {e}")
                continue
            empty = [p["title"] for p in dashboard["panels"] if p["type"] != "row" and not (
                p.get("targets") and all(t.get("expr") for t in p["targets"]))]
            if empty:
                failures.append(f"monitoring: {key}: panels without a query: {empty}")
    monitors = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ServiceMonitor")
    if monitors != ["slurm-operator", "slurm-operator-webhook"]:
        failures.append(f"monitoring: ServiceMonitors {monitors}")
    bare = [d["kind"] for d in yaml.safe_load_all(render("slurm-operator", "slurm-operator", "slinky", sets)) if d
            and d["kind"] in ("PrometheusRule", "ServiceMonitor")]
    if bare:
        failures.append(f"monitoring: {bare} rendered without their CRDs")


def check_operator_slinky_defaults(failures):
    """Slinky's own values.yaml of each release installs: every key known, its images replaced
    by the chart's, its worker counts and cert-manager taken. Needs a git directory of Slinky's
    slurm-operator in $SLINKY_CHART_REPO (read at test time, never copied into this tree)."""
    repo = os.environ.get("SLINKY_CHART_REPO", "")
    if not repo:
        print("note: SLINKY_CHART_REPO unset: Slinky's own values files not rendered")
        return
    try:
        import yaml
    except ImportError:
        return
    import tempfile
    tags = subprocess.run(["git", "-C", repo, "tag", "--list", "v1.*"], capture_output=True,
                          text=True, check=True).stdout.split()
    for ref in [t for t in tags if "-rc" not in t] + ["HEAD"]:
        want = Expect(f"Slinky {ref} values.yaml", failures)
        text = subprocess.run(["git", "-C", repo, "show", f"{ref}:helm/slurm-operator/values.yaml"],
                              capture_output=True, text=True, check=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            result = helm("install", "slurm-operator", str(CHARTS / "slurm-operator"), "--dry-run=client",
                          "--namespace", "slinky", "--values", f.name)
            if not want(result.returncode == 0, f"install refused: {result.stderr.strip()[:600]}"):
                continue
            notes = result.stdout.split("\nNOTES:\n", 1)[-1]
            want("keys this chart does not know" not in notes, f"unknown keys: {notes[-800:]}")
            objs = operator_objects(["--values", f.name])
        slinky = yaml.safe_load(text)
        op, hook = "slurm-operator", "slurm-operator-webhook"
        args = container_of(objs, op).get("args", [])
        for kind in ("accounting", "controller", "loginset", "nodeset", "restapi", "token"):
            count = slinky["operator"].get(f"{kind}Workers")
            want(f"--{kind}-workers={count}" in args, f"operator.{kind}Workers={count}, args {args}")
        want("--leader-elect" in args, "leader election")
        want.equal([container_of(objs, n).get("image") for n in (op, hook)],
                   ["localhost/tightrope/slurm-operator:dev"] * 2, "the chart's image, not Slinky's")
        want(not any(k == "CustomResourceDefinition" for k, _ in objs), "crds.enabled: false")
        secret = slinky["certManager"]["secretName"]
        want(("Certificate", secret) in objs, f"certManager.enabled: Certificate {secret}")
        vwc = objs.get(("ValidatingWebhookConfiguration", hook), {})
        want.equal(vwc.get("metadata", {}).get("annotations", {}).get("cert-manager.io/inject-ca-from"),
                   f"slinky/{secret}", "cert-manager injects the caBundle")


def check_slurm_slinky_defaults(failures):
    """Slinky's own slurm values.yaml of each release renders (its `config: null` beside each
    partition's configMap included). Needs $SLINKY_CHART_REPO, as above."""
    repo = os.environ.get("SLINKY_CHART_REPO", "")
    if not repo:
        return
    import tempfile
    tags = subprocess.run(["git", "-C", repo, "tag", "--list", "v1.*"], capture_output=True,
                          text=True, check=True).stdout.split()
    for ref in [t for t in tags if "-rc" not in t] + ["HEAD"]:
        text = subprocess.run(["git", "-C", repo, "show", f"{ref}:helm/slurm/values.yaml"],
                              capture_output=True, text=True, check=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            result = helm("template", "slurm", str(CHARTS / "slurm"), "--namespace", "slurm", "--values", f.name)
        if result.returncode != 0:
            failures.append(f"Slinky {ref} slurm values.yaml: refused: {result.stderr.strip()[:600]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the golden files")
    parser.add_argument("--chart", choices=SELECTED, help="only this chart's cases and checks")
    args = parser.parse_args()
    program = os.environ.get("HELM", "")
    if not program or not (os.path.isfile(program) and os.access(program, os.X_OK)):
        print(f"SKIP: no helm: HELM={program!r} is not a program (configure with "
              "-DTIGHTROPE_HELM=/path/to/helm, or let `scripts/testbed tool-path helm` provide it)")
        return SKIP
    if args.chart:
        SELECTED[:] = [args.chart]
    failures = []
    check_golden(args.update, failures)
    if not args.update:
        check_lint(failures)
        check_invalid(failures)
        if "slurm-operator" in SELECTED:
            check_crds_packaged(failures)
            check_crds_left_alone(failures)
            check_operator_slinky_values(failures)
            check_operator_precedence(failures)
            check_operator_notes(failures)
            check_operator_monitoring(failures)
            check_operator_slinky_defaults(failures)
        if "slurm" in SELECTED:
            check_crs_fit_crds(failures)
            check_slinky_values(failures)
            check_nulls(failures)
            check_notes(failures)
            check_slurm_slinky_defaults(failures)
    for f in failures:
        print(f"FAIL {f}\n")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("helm charts: lint, golden renders, invalid values, CRD fit: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
