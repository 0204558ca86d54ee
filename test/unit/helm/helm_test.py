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
import os
import re
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
    ("slurm-default", "slurm", "slurm", "slurm", [], True),
    ("slurm-full", "slurm", "hpc", "hpc", ["slurm-full.yaml"], False),
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
    ("slurm", ["--set", "nodesets.slinky.replicas=-2"], "nodesets/slinky/replicas"),
    ("slurm", ["--set", "imagePullPolicy=Sometimes"], "imagePullPolicy"),
    ("slurm", ["--set", "controller.persistence.enabled=yes"], "controller/persistence/enabled"),
    ("slurm", ["--set", "restapi.replicas=one"], "restapi/replicas"),
    ("slurm", ["--set", "nodesets.slinky.scalingMode=Deployment"], "nodesets/slinky/scalingMode"),
    ("slurm", ["--set-string", "configFiles.slurm\\.conf=ClusterName=x"], "configFiles"),
]

# Values the schema cannot judge and the templates refuse: (chart, arguments, message part).
REFUSED = [
    ("slurm", ["--set", "partitions.slinky.nodesets={slinky}"],
     "partitions.slinky: NodeSet slinky already has a partition"),
    ("slurm", ["--set", "partitions.all.nodesets={gpu}"],
     "partitions.all.nodesets: \"gpu\" is not an enabled NodeSet"),
    ("slurm-operator", ["--set", "webhook.certificate.cert=x"],
     "webhook.certificate: caCert, cert and key go together"),
    ("slurm-operator", ["--set", "replicas=2", "--set", "leaderElection=false"],
     "replicas: more than one operator needs leaderElection: true"),
]

GENERATED_KEYS = ("ca.crt", "tls.crt", "tls.key", "caBundle", "slurm.key", "jwt_hs256.key")
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
        args = []
        for v in values:
            args += ["--values", str(VALUES / v)]
        text = normalize(render(chart, release, namespace, args), generated, failures, name)
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
    for chart in ("slurm-operator", "slurm"):
        result = helm("lint", "--strict", str(CHARTS / chart))
        if result.returncode != 0:
            failures.append(f"helm lint {chart}:\n{result.stdout}{result.stderr}")


def check_invalid(failures):
    for chart, args, path in INVALID:
        result = helm("template", "x", str(CHARTS / chart), *args)
        named = path in result.stderr or path.replace("/", ".") in result.stderr
        if result.returncode == 0 or not named:
            failures.append(f"{chart} {' '.join(args)}: want a refusal naming {path}, got "
                            f"exit {result.returncode}: {result.stderr.strip()[:600]}")
    for chart, args, message in REFUSED:
        result = helm("template", "x", str(CHARTS / chart), *args)
        if result.returncode == 0 or message not in result.stderr:
            failures.append(f"{chart} {' '.join(args)}: want a refusal saying {message!r}, got "
                            f"exit {result.returncode}: {result.stderr.strip()[:600]}")


def check_crds_packaged(failures):
    """The operator chart installs the six CRDs from its crds/, the one copy."""
    out = render("slurm-operator", "slurm-operator", "slinky", ["--include-crds"])
    names = re.findall(r"^  name: (\S+\.slinky\.slurm\.net)$", out, re.M)
    want = sorted(f"{p}.slinky.slurm.net" for p in
                  ("accountings", "controllers", "loginsets", "nodesets", "restapis", "tokens"))
    if sorted(names) != want:
        failures.append(f"helm template --include-crds: CRDs {sorted(names)}, want {want}")
    # deploy/crds holds one link per CRD file of the chart (a linked directory would break
    # `kubectl apply -f deploy/crds`, which does not enter a link given without a slash).
    chart_crds = sorted(p.name for p in (CHARTS / "slurm-operator" / "crds").glob("*.yaml"))
    links = ROOT / "deploy" / "crds"
    linked = sorted(p.name for p in links.iterdir())
    if linked != chart_crds:
        failures.append(f"deploy/crds holds {linked}, want links to each of {chart_crds}")
    for name in linked:
        link = links / name
        target = CHARTS / "slurm-operator" / "crds" / name
        if not link.is_symlink() or link.resolve() != target.resolve():
            failures.append(f"deploy/crds/{name} is not a link to {target.relative_to(ROOT)}")


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
    for crd_file in sorted((CHARTS / "slurm-operator" / "crds").glob("*.yaml")):
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the golden files")
    args = parser.parse_args()
    program = os.environ.get("HELM", "")
    if not program or not (os.path.isfile(program) and os.access(program, os.X_OK)):
        print(f"SKIP: no helm: HELM={program!r} is not a program (configure with "
              "-DTIGHTROPE_HELM=/path/to/helm, or let `scripts/testbed tool-path helm` provide it)")
        return SKIP
    failures = []
    check_golden(args.update, failures)
    if not args.update:
        check_lint(failures)
        check_invalid(failures)
        check_crds_packaged(failures)
        check_crs_fit_crds(failures)
    for f in failures:
        print(f"FAIL {f}\n")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("helm charts: lint, golden renders, invalid values, CRD fit: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
