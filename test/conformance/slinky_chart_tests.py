#!/usr/bin/env python3
"""Slinky's own Helm unit tests, run against Tightrope's charts: every test case of its
helm/slurm/tests and helm/slurm-operator/tests renders deploy/helm/slurm or
deploy/helm/slurm-operator with the case's values, and must render where Slinky's test expects a
render and refuse where it expects `failedTemplate`.

    HELM=/path/to/helm test/conformance/slinky_chart_tests.py [SLINKY_GIT_DIR] [--ref REF] [-v]

SLINKY_GIT_DIR (default $SLINKY_CHART_REPO) is a git directory of SlinkyProject/slurm-operator,
bare or a clone; REF (default HEAD) the commit or tag whose tests and charts are read. Both are
read from git at run time and never copied into this tree. CI has no copy of Slinky, so this
runs by hand, like helm_test.py's SLINKY_CHART_REPO section.

The two charts share values and object names, not template files, so a case is judged by its
outcome, never by a template's path or a field:
- a case whose asserts hold `failedTemplate`: our render fails, with a message;
- any other case: our render succeeds and holds every kind of object that Slinky's chart,
  rendered with the same values, makes from the template files the case tests; where Slinky's
  makes none (`hasDocuments: count: 0`), we make none of the objects those files make in the
  suite's other cases (same kind and name). Field asserts and snapshots are not compared: the
  objects are built differently on purpose (docs/helm.md).
helm-unittest renders only a suite's templates and can fake `lookup`; helm template renders the
whole chart. A case whose expectation Slinky's own chart does not meet under helm template is
listed as a NOTE and judged on the outcome alone.

Exits 0 when every case agrees or differs as ALLOWED says, 1 otherwise, 77 without a helm.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHARTS = ROOT / "deploy" / "helm"
SUITES = ("slurm", "slurm-operator")
SKIP = 77

# Where Tightrope's charts differ from Slinky's on purpose, each in docs/migrate-from-slinky.md:
# (test file, test name) -> why.
ALLOWED = {
    ("slurm-operator/tests/operator_pdb_test.yaml", "should not render when replicas is 1"):
        "two operators by default (Slinky: one), so operator.pdb.enabled makes a budget",
    ("slurm-operator/tests/operator_rbac_test.yaml", "should not render when serviceAccount.create is false"):
        "the chart's RBAC is bound to the ServiceAccount you bring (rbac.create: false drops it): "
        "Tightrope's operator needs rules of its own",
    ("slurm-operator/tests/webhook_rbac_test.yaml", "should not render when serviceAccount.create is false"):
        "the chart's RBAC is bound to the ServiceAccount you bring (rbac.create: false drops it): "
        "Tightrope's webhook needs rules of its own",
    ("slurm/tests/vendor_google_a3mega_test.yaml",
     "should inject AutoDetect=nvidia in gres.conf when A3 Mega is enabled"):
        "no gres.conf ConfigMap: the operator writes gres.conf (docs/gpus.md)",
    ("slurm/tests/vendor_google_a3ultra_test.yaml",
     "should inject AutoDetect=nvidia in gres.conf when A3 Ultra is enabled"):
        "no gres.conf ConfigMap: the operator writes gres.conf (docs/gpus.md)",
}

# Slinky releases before webhook.podsBinding always made the pods/binding
# MutatingWebhookConfiguration; this chart, like Slinky's newer code, makes it on request.
PODS_BINDING_ALWAYS = ("Slinky's chart at this ref always makes the pods/binding webhook; here (and in its "
                       "newer code) webhook.podsBinding: true does")


class Yaml12Loader(yaml.SafeLoader):
    """Reads a test file as helm-unittest does (YAML 1.2's core schema): `on`, `no` and
    `1:00:00` are strings, not YAML 1.1's booleans and sexagesimal numbers."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _pattern, _first in (
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789")):
    Yaml12Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))
Yaml12Loader.add_constructor("tag:yaml.org,2002:bool",
                             lambda loader, node: loader.construct_scalar(node).lower() == "true")
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: int(
    node.value.replace("0o", ""), 8 if "0o" in node.value else 16 if "0x" in node.value else 10))
Yaml12Loader.add_constructor("tag:yaml.org,2002:float", lambda loader, node: float(
    node.value.lower().replace(".inf", "inf").replace(".nan", "nan")))


def load_yaml(text):
    return yaml.load(text, Loader=Yaml12Loader)


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, check=True).stdout


def git_dir(path):
    """A bare mirror is its own git directory; a clone keeps it in .git."""
    return str(Path(path) / ".git") if (Path(path) / ".git").exists() else str(path)


def helm(*args):
    return subprocess.run([os.environ["HELM"], *args], capture_output=True, text=True, timeout=120)


def merge(into, layer):
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def nested(values):
    """helm-unittest's `set` keys are paths ("operator.image.tag"); a values file nests them."""
    out = {}
    for key, value in (values or {}).items():
        parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", key)]
        for part in reversed(parts):
            value = {part: value}
        merge(out, value)
    return out


def render(chart, release, namespace, values_files):
    args = ["template", release, str(chart), "--namespace", namespace]
    for f in values_files:
        args += ["--values", f]
    result = helm(*args)
    if result.returncode != 0:
        return None, result.stderr
    return result.stdout, ""


def documents(text, chart_name):
    """(template file under templates/, kind, name) of each rendered object; the file comes from
    helm's `# Source:` line."""
    out = []
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        try:
            obj = yaml.safe_load(doc)
        except yaml.YAMLError:
            continue
        if not isinstance(obj, dict) or "kind" not in obj:
            continue
        source = re.search(r"^# Source: (\S+)", doc, re.M)
        path = source.group(1) if source else ""
        prefix = f"{chart_name}/templates/"
        out.append((path[len(prefix):] if path.startswith(prefix) else path, obj["kind"],
                    (obj.get("metadata") or {}).get("name", "")))
    return out


def message(stderr):
    """helm's error on one line: the template's `fail` text, or the schema's complaints."""
    text = " ".join(line.strip() for line in stderr.splitlines()
                    if line.strip() and not line.startswith(("WARNING", "Use --debug", "level=")))
    text = re.sub(r"^Error: ", "", text)
    return re.sub(r"execution error at \([^)]*\): ", "", text)[:300]


class Case:
    """One test of a suite, its values written out as files for helm."""

    def __init__(self, repo, ref, suite_file, suite, case, tmp, index):
        self.file, self.name, self.case = suite_file, case["it"], case
        release = {**(suite.get("release") or {}), **(case.get("release") or {})}
        self.release = release.get("name", "RELEASE-NAME")
        self.namespace = release.get("namespace", "NAMESPACE")
        templates = case.get("templates") or ([case["template"]] if case.get("template")
                                              else suite.get("templates") or [])
        self.templates = {t.removeprefix("templates/") for t in templates}
        self.asserts = case.get("asserts") or []
        # helm-unittest's order: values files, then set, the suite's before the case's.
        self.values = []
        for i, layer in enumerate([*(suite.get("values") or []), *(case.get("values") or []),
                                   nested(suite.get("set")), nested(case.get("set"))]):
            path = Path(tmp) / f"case{index}-{i}.yaml"
            if isinstance(layer, str):
                path.write_bytes(git(repo, "show", f"{ref}:helm/{Path(suite_file).parent / layer}"))
            else:
                # JSON, which helm reads without guessing types: "08080" stays a string.
                path.write_text(json.dumps(layer))
            self.values.append(str(path))
        self.slinky = self.ours = None
        self.slinky_error = self.our_error = ""

    def expects_failure(self):
        return any("failedTemplate" in a and not a.get("not") for a in self.asserts)

    def expects_none(self):
        return any((a.get("hasDocuments") or {}).get("count") == 0 and not a.get("not") for a in self.asserts)

    def slinky_message(self):
        for a in self.asserts:
            if "failedTemplate" in a:
                spec = a["failedTemplate"] or {}
                return spec.get("errorMessage") or spec.get("errorPattern") or ""
        return ""

    def run(self, slinky_chart, our_chart, chart_name):
        slinky, self.slinky_error = render(slinky_chart, self.release, self.namespace, self.values)
        ours, self.our_error = render(our_chart, self.release, self.namespace, self.values)
        self.slinky = None if slinky is None else documents(slinky, chart_name)
        self.ours = None if ours is None else documents(ours, chart_name)
        return self


def judge(c, made_by, pods_binding_toggle):
    """(outcome, why, allowed, note): outcome "render", "refuse" or "differ"; allowed, why a
    difference is meant; note, when Slinky's own chart under helm template does not do what
    its test says."""
    note = ""
    if (c.slinky is None) != c.expects_failure():
        note = (f"Slinky's chart refuses: {message(c.slinky_error)}" if c.slinky is None
                else "Slinky's chart renders")
    allowed = ALLOWED.get((c.file, c.name), "")
    if c.expects_failure():
        if c.ours is None:
            return "refuse", message(c.our_error), "", note
        return "differ", f"renders where Slinky refuses ({c.slinky_message()!r})", allowed, note
    if c.ours is None:
        return "differ", f"refused: {message(c.our_error)}", allowed, note
    if c.slinky is None:
        return "render", "", "", note
    missing = sorted({kind for path, kind, _ in c.slinky if path in c.templates}
                     - {kind for _, kind, _ in c.ours})
    if missing:
        if missing == ["MutatingWebhookConfiguration"] and not pods_binding_toggle:
            allowed = PODS_BINDING_ALWAYS
        why = f"no {', '.join(missing)} (Slinky's {', '.join(sorted(c.templates))} makes one)"
        return "differ", why, allowed, note
    if c.expects_none():
        # Slinky's operator chart names some objects after the chart alone ("slurm-operator"),
        # this one after the release too ("<release>-slurm-operator"): names are compared
        # without the release's prefix.
        def bare(name):
            return name.removeprefix(f"{c.release}-")
        ours = {(kind, bare(name)) for _, kind, name in c.ours}
        extra = sorted(f"{kind} {name}" for t in c.templates for kind, name in made_by.get(t, ())
                       if (kind, bare(name)) in ours)
        if extra:
            return "differ", f"makes {', '.join(extra)} where Slinky makes none", allowed, note
    return "render", "", "", note


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("slinky", nargs="?", default=os.environ.get("SLINKY_CHART_REPO", ""),
                        help="git directory of SlinkyProject/slurm-operator (default $SLINKY_CHART_REPO)")
    parser.add_argument("--ref", default="HEAD", help="the commit or tag whose tests run (default HEAD)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = parser.parse_args()
    program = os.environ.get("HELM", "")
    if not program or not (os.path.isfile(program) and os.access(program, os.X_OK)):
        print(f"SKIP: no helm: HELM={program!r} is not a program (`scripts/testbed tool-path helm`)")
        return SKIP
    if not args.slinky:
        parser.error("name Slinky's git directory, or set SLINKY_CHART_REPO")
    repo, ref = git_dir(args.slinky), args.ref
    commit = git(repo, "rev-parse", "--short", f"{ref}^{{commit}}").decode().strip()

    totals = {"render": 0, "refuse": 0, "differ": 0}
    differing, allowed_ones, notes = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        # Slinky's charts at ref; its operator chart's CRD subchart (file://../) put in charts/.
        tarfile.open(fileobj=BytesIO(git(repo, "archive", ref, "helm"))).extractall(tmp, filter="data")
        slinky_charts = Path(tmp) / "helm"
        if (slinky_charts / "slurm-operator-crds").exists():
            (slinky_charts / "slurm-operator" / "charts").mkdir(exist_ok=True)
            (slinky_charts / "slurm-operator-crds").rename(
                slinky_charts / "slurm-operator" / "charts" / "slurm-operator-crds")
        operator_values = yaml.safe_load((slinky_charts / "slurm-operator" / "values.yaml").read_text())
        pods_binding_toggle = "podsBinding" in (operator_values.get("webhook") or {})
        index = 0
        for chart_name in SUITES:
            listing = git(repo, "ls-tree", "--name-only", f"{ref}:helm/{chart_name}/tests/").decode().split()
            for name in sorted(n for n in listing if n.endswith("_test.yaml")):
                suite_file = f"{chart_name}/tests/{name}"
                suite = load_yaml(git(repo, "show", f"{ref}:helm/{suite_file}"))
                cases = []
                for case in suite.get("tests") or []:
                    cases.append(Case(repo, ref, suite_file, suite, case, tmp, index))
                    index += 1
                with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
                    cases = list(pool.map(lambda c: c.run(slinky_charts / chart_name, CHARTS / chart_name,
                                                          chart_name), cases))
                # What each template file makes in some case of the suite: what a case that
                # expects nothing from it looks for.
                made_by = {}
                for c in cases:
                    for path, kind, obj_name in c.slinky or ():
                        made_by.setdefault(path, set()).add((kind, obj_name))
                counts = {"render": 0, "refuse": 0, "differ": 0}
                for c in cases:
                    outcome, why, allowed, note = judge(c, made_by, pods_binding_toggle)
                    counts[outcome] += 1
                    totals[outcome] += 1
                    if outcome == "differ":
                        (allowed_ones if allowed else differing).append(
                            f"{suite_file}: {c.name!r}: {why}" + (f" -- {allowed}" if allowed else ""))
                    if note:
                        notes.append(f"{suite_file}: {c.name!r}: {note}")
                    if args.verbose:
                        print(f"  {outcome:6} {c.name}{': ' + why if why else ''}")
                print(f"{suite_file}: {len(cases)} cases, {counts['render']} render, "
                      f"{counts['refuse']} refuse, {counts['differ']} differ")
    for line in differing:
        print(f"DIFFER  {line}")
    for line in allowed_ones:
        print(f"ALLOWED {line}")
    for line in notes:
        print(f"NOTE    judged on the outcome alone, {line}")
    print(f"Slinky {ref} ({commit}): {index} cases: {totals['render']} render as Slinky's, "
          f"{totals['refuse']} refuse as Slinky's, {totals['differ']} differ "
          f"({len(allowed_ones)} allowed)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
