#!/usr/bin/env python3
"""Render and lint deploy/helm/fleetq with Helm itself (Helm's Go SDK).

Needs `pip install helm-python-sdk==0.2.2` (it bundles libhelm_c, Helm v4's
Go SDK behind a C ABI; no helm binary) and, for the schema check,
`kubernetes-validate`. For every values file in deploy/helm/fleetq/ci/:

- `helm lint --strict` must report no warning or error;
- `helm template` must render, every document must be YAML, and every
  object but the ServiceMonitor (a CRD) must validate against the
  Kubernetes OpenAPI schemas (kubernetes-validate, when installed);
- with --compare DIR (the FLEETQ_DEPLOY_RENDER_DIR of
  `cargo test --test deploy_manifests`), Helm's objects must equal the
  ones the test's own renderer produced.

    FLEETQ_DEPLOY_RENDER_DIR=/tmp/r cargo test -p fleetq --test deploy_manifests
    python3 deploy/helm/check-with-helm.py --compare /tmp/r

Exit 0 when everything holds, 1 otherwise.
"""

import argparse
import json
import pathlib
import sys

import yaml
from helm_python import chart as helm_chart

RELEASE = "fleet"
NAMESPACE = "gpu-system"
KUBE_VERSION = "1.33.0"
CHART = pathlib.Path(__file__).resolve().parent / "fleetq"


def rendered_objects(chart, values):
    manifests = chart.render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc is not None:
                objects.append(doc)
    return objects


def key(obj):
    return (obj.get("kind", ""), obj.get("metadata", {}).get("name", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", metavar="DIR", help="the test renderer's output to compare with")
    args = parser.parse_args()

    try:
        import kubernetes_validate  # noqa: PLC0415
    except ImportError:
        kubernetes_validate = None
        print("kubernetes-validate is not installed: no schema check")

    chart = helm_chart.Chart.load(str(CHART))
    failures = 0
    for values_file in sorted((CHART / "ci").glob("*.yaml")):
        scenario = values_file.stem
        values = yaml.safe_load(values_file.read_text()) or {}

        report = helm_chart.lint(str(CHART), values, strict=True, namespace=NAMESPACE,
                                 kube_version="v" + KUBE_VERSION)
        problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
        problems += [{"error": e} for e in report.get("errors", []) or []]
        for p in problems:
            print(f"{scenario}: helm lint: {p}")
        failures += len(problems)

        objects = rendered_objects(chart, values)
        kinds = sorted(key(o) for o in objects)
        print(f"{scenario}: {len(objects)} objects: {', '.join(k + '/' + n for k, n in kinds)}")

        if kubernetes_validate is not None:
            for obj in objects:
                if obj.get("kind") == "ServiceMonitor":
                    continue
                try:
                    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
                except Exception as e:  # noqa: BLE001 - report every kind of failure
                    print(f"{scenario}: {key(obj)}: schema: {e}")
                    failures += 1

        if args.compare:
            mine_path = pathlib.Path(args.compare) / f"{scenario}.json"
            if not mine_path.exists():
                print(f"{scenario}: {mine_path} missing (run the cargo test with FLEETQ_DEPLOY_RENDER_DIR)")
                failures += 1
                continue
            mine = {key(o): o for o in json.loads(mine_path.read_text())}
            helms = {key(o): o for o in objects}
            if mine.keys() != helms.keys():
                print(f"{scenario}: objects differ: helm only {sorted(helms.keys() - mine.keys())}, "
                      f"test only {sorted(mine.keys() - helms.keys())}")
                failures += 1
            for k in sorted(mine.keys() & helms.keys()):
                if mine[k] != helms[k]:
                    print(f"{scenario}: {k} differs:\n helm: {json.dumps(helms[k], sort_keys=True)}\n"
                          f" test: {json.dumps(mine[k], sort_keys=True)}")
                    failures += 1
            if mine == helms:
                print(f"{scenario}: Helm and the test renderer agree on every object")

    print("ok" if failures == 0 else f"{failures} problems")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
