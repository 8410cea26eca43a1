//! deploy/ stays deployable. Without a cluster, Docker or Helm here:
//!
//! - the Helm chart is rendered with a Go-template engine (gtmpl) plus the
//!   few Helm functions its templates use, for every values file in
//!   `deploy/helm/fleetq/ci/` (and a couple of overrides below); every
//!   document must be YAML, of a known kind and apiVersion, and the objects
//!   must fit together (selectors, ports, claims, RBAC, peers);
//! - every `fleetq` command line in the chart, the compose file and the
//!   systemd units is parsed by the real binary (`fleetq ARGS --help`
//!   exits 0 only if every flag exists and every value parses), and the
//!   example config files are loaded as the daemons load them;
//! - the Grafana dashboard is JSON whose queries cover every metric fleetq
//!   exports, and name no other.
//!
//! `FLEETQ_DEPLOY_RENDER_DIR=DIR` writes each rendered scenario to
//! `DIR/<scenario>.json`, for `deploy/helm/check-with-helm.py` to compare
//! with Helm's own rendering.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gtmpl::{Context, Func, FuncError, Template, Value};
use serde::Deserialize;
use serde_json::{json, Value as Json};

const RELEASE: &str = "fleet";
const NAMESPACE: &str = "gpu-system";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// All YAML documents of `text` (merge keys applied), empty ones left out.
fn yaml_docs(text: &str, what: &str) -> Vec<Json> {
    let mut docs = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let mut value = serde_norway::Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("{what}: document {}: not YAML: {e}\n{text}", i + 1));
        value
            .apply_merge()
            .unwrap_or_else(|e| panic!("{what}: document {}: {e}", i + 1));
        let json: Json = serde_json::to_value(&value)
            .unwrap_or_else(|e| panic!("{what}: document {}: {e}", i + 1));
        if !json.is_null() {
            docs.push(json);
        }
    }
    docs
}

fn yaml_one(text: &str, what: &str) -> Json {
    let mut docs = yaml_docs(text, what);
    assert!(docs.len() <= 1, "{what}: one YAML document expected");
    docs.pop().unwrap_or(Json::Null)
}

fn s<'a>(v: &'a Json, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what}: a string expected, got {v}"))
}

// ---------------------------------------------------------------------
// A Helm-compatible renderer: Go templates (gtmpl) plus the Sprig/Helm
// functions the chart uses, with Helm's semantics. A template calling any
// other function fails to parse, so the chart cannot drift beyond what
// this test checks.

thread_local! {
    /// The chart's `_*.tpl` sources, for `include`.
    static HELPERS: RefCell<String> = const { RefCell::new(String::new()) };
}

static FUNCS: &[(&str, Func)] = &[
    ("include", include as Func),
    ("quote", quote as Func),
    ("toYaml", to_yaml as Func),
    ("nindent", nindent as Func),
    ("indent", indent_fn as Func),
    ("default", default as Func),
    ("trunc", trunc as Func),
    ("trimSuffix", trim_suffix as Func),
    ("contains", contains as Func),
    ("until", until as Func),
    ("add1", add1 as Func),
    ("int", int as Func),
    ("join", join as Func),
];

fn arg<'a>(args: &'a [Value], i: usize, name: &str) -> Result<&'a Value, FuncError> {
    args.get(i)
        .ok_or_else(|| FuncError::AtLeastXArgs(name.to_string(), i + 1))
}

/// Go's `%v` of a value, "" for nil (as Sprig's strval).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn int_of(v: &Value) -> Result<i64, FuncError> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or(FuncError::UnableToConvertFromValue),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| FuncError::UnableToConvertFromValue),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::NoValue | Value::Nil => Ok(0),
        _ => Err(FuncError::UnableToConvertFromValue),
    }
}

/// Sprig's `empty`.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Map(m) | Value::Object(m) => m.is_empty(),
        Value::Function(_) => false,
    }
}

fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn include(args: &[Value]) -> Result<Value, FuncError> {
    let name = text(arg(args, 0, "include")?);
    let dot = args.get(1).cloned().unwrap_or(Value::Nil);
    let helpers = HELPERS.with(|h| h.borrow().clone());
    let mut t = Template::with_name(name.clone());
    t.add_funcs(FUNCS);
    t.add_template("_helpers.tpl", helpers)
        .map_err(|e| FuncError::Generic(format!("_helpers.tpl: {e}")))?;
    if !t.tree_set.contains_key(&name) {
        return Err(FuncError::Generic(format!("include: no template {name:?}")));
    }
    t.render(&Context::from(dot))
        .map(Value::String)
        .map_err(|e| FuncError::Generic(format!("include {name:?}: {e}")))
}

fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::NoValue | Value::Nil))
        .map(|v| go_quote(&text(v)))
        .collect();
    Ok(Value::String(quoted.join(" ")))
}

fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    let json = from_gtmpl(arg(args, 0, "toYaml")?);
    let yaml = serde_norway::to_string(&json).map_err(|e| FuncError::Generic(e.to_string()))?;
    Ok(Value::String(yaml.trim_end_matches('\n').to_string()))
}

fn indent_text(n: i64, s: &str) -> String {
    let pad = " ".repeat(usize::try_from(n).unwrap_or(0));
    format!("{pad}{}", s.replace('\n', &format!("\n{pad}")))
}

fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    let n = int_of(arg(args, 0, "nindent")?)?;
    let s = text(arg(args, 1, "nindent")?);
    Ok(Value::String(format!("\n{}", indent_text(n, &s))))
}

fn indent_fn(args: &[Value]) -> Result<Value, FuncError> {
    let n = int_of(arg(args, 0, "indent")?)?;
    let s = text(arg(args, 1, "indent")?);
    Ok(Value::String(indent_text(n, &s)))
}

fn default(args: &[Value]) -> Result<Value, FuncError> {
    let d = arg(args, 0, "default")?;
    Ok(match args.get(1) {
        Some(v) if !is_empty(v) => v.clone(),
        _ => d.clone(),
    })
}

fn trunc(args: &[Value]) -> Result<Value, FuncError> {
    let n = int_of(arg(args, 0, "trunc")?)?;
    let s = text(arg(args, 1, "trunc")?);
    let len = i64::try_from(s.len()).unwrap_or(i64::MAX);
    let out = if n < 0 && len + n > 0 {
        s[usize::try_from(len + n).unwrap_or(0)..].to_string()
    } else if n >= 0 && len > n {
        s[..usize::try_from(n).unwrap_or(0)].to_string()
    } else {
        s
    };
    Ok(Value::String(out))
}

fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    let suffix = text(arg(args, 0, "trimSuffix")?);
    let s = text(arg(args, 1, "trimSuffix")?);
    Ok(Value::String(
        s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string(),
    ))
}

fn contains(args: &[Value]) -> Result<Value, FuncError> {
    let needle = text(arg(args, 0, "contains")?);
    let hay = text(arg(args, 1, "contains")?);
    Ok(Value::Bool(hay.contains(&needle)))
}

fn until(args: &[Value]) -> Result<Value, FuncError> {
    let n = int_of(arg(args, 0, "until")?)?;
    Ok(Value::Array((0..n.max(0)).map(Value::from).collect()))
}

fn add1(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::from(int_of(arg(args, 0, "add1")?)? + 1))
}

fn int(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::from(int_of(arg(args, 0, "int")?)?))
}

fn join(args: &[Value]) -> Result<Value, FuncError> {
    let sep = text(arg(args, 0, "join")?);
    let parts: Vec<String> = match arg(args, 1, "join")? {
        Value::Array(items) => items
            .iter()
            .filter(|v| !matches!(v, Value::NoValue | Value::Nil))
            .map(text)
            .collect(),
        Value::NoValue | Value::Nil => Vec::new(),
        other => vec![text(other)],
    };
    Ok(Value::String(parts.join(&sep)))
}

fn to_gtmpl(v: &Json) -> Value {
    match v {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(u)) => Value::from(u),
            _ => Value::from(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(a) => Value::Array(a.iter().map(to_gtmpl).collect()),
        Json::Object(o) => Value::Map(o.iter().map(|(k, v)| (k.clone(), to_gtmpl(v))).collect()),
    }
}

fn from_gtmpl(v: &Value) -> Json {
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => json!(i),
            (None, Some(u), _) => json!(u),
            (_, _, Some(f)) => json!(f),
            _ => Json::Null,
        },
        Value::Array(a) => Json::Array(a.iter().map(from_gtmpl).collect()),
        Value::Map(m) | Value::Object(m) => {
            Json::Object(m.iter().map(|(k, v)| (k.clone(), from_gtmpl(v))).collect())
        }
    }
}

/// Helm's values merge: maps merge key by key, anything else replaces,
/// null deletes.
fn merge(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(slot) = b.get_mut(k) {
                    merge(slot, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

const CHART: &str = "deploy/helm/fleetq";

fn chart_values(overrides: &[&Json]) -> Json {
    let mut values = yaml_one(&read(&format!("{CHART}/values.yaml")), "values.yaml");
    for o in overrides {
        merge(&mut values, o);
    }
    values
}

/// One rendered object and the template it came from.
#[derive(Debug, Clone)]
struct Object {
    template: String,
    value: Json,
}

impl Object {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
}

/// `helm template RELEASE deploy/helm/fleetq -n NAMESPACE` with `values`.
fn render_chart(values: &Json) -> Vec<Object> {
    let dir = repo().join(CHART).join("templates");
    let meta = yaml_one(&read(&format!("{CHART}/Chart.yaml")), "Chart.yaml");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("templates entry").path())
        .collect();
    files.sort();
    let mut helpers = String::new();
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('_') {
            helpers.push_str(&std::fs::read_to_string(f).expect("helpers"));
            helpers.push('\n');
        }
    }
    HELPERS.with(|h| *h.borrow_mut() = helpers.clone());
    let mut objects = Vec::new();
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('_') || name == "NOTES.txt" {
            continue;
        }
        assert!(
            name.ends_with(".yaml"),
            "{name}: templates are .yaml files, helpers _*.tpl"
        );
        let path = format!("fleetq/templates/{name}");
        let ctx = json!({
            "Values": values,
            "Release": {"Name": RELEASE, "Namespace": NAMESPACE, "Service": "Helm",
                        "IsInstall": true, "IsUpgrade": false, "Revision": 1},
            "Chart": {"Name": meta["name"], "Version": meta["version"],
                      "AppVersion": meta["appVersion"], "Description": meta["description"],
                      "Type": meta["type"], "KubeVersion": meta["kubeVersion"]},
            "Template": {"Name": path, "BasePath": "fleetq/templates"},
        });
        let mut t = Template::with_name(path.clone());
        t.add_funcs(FUNCS);
        t.add_template("_helpers.tpl", helpers.clone())
            .unwrap_or_else(|e| panic!("_helpers.tpl: {e}"));
        t.parse(std::fs::read_to_string(f).expect("template"))
            .unwrap_or_else(|e| panic!("{path}: does not parse: {e}"));
        let out = t
            .render(&Context::from(to_gtmpl(&ctx)))
            .unwrap_or_else(|e| panic!("{path}: does not render: {e}"));
        assert!(
            !out.contains("<no value>"),
            "{path}: refers to a value that is not set:\n{out}"
        );
        for value in yaml_docs(&out, &path) {
            objects.push(Object {
                template: path.clone(),
                value,
            });
        }
    }
    objects
}

// ---------------------------------------------------------------------
// Kubernetes shape checks.

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric())
}

fn string_map(v: &Json, what: &str) -> BTreeMap<String, String> {
    match v {
        Json::Null => BTreeMap::new(),
        Json::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), s(v, &format!("{what}.{k}")).to_string()))
            .collect(),
        other => panic!("{what}: a map of strings expected, got {other}"),
    }
}

/// `selector` ⊆ `labels`.
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

const KINDS: &[(&str, &str, bool)] = &[
    // (apiVersion, kind, namespaced)
    ("apps/v1", "StatefulSet", true),
    ("apps/v1", "Deployment", true),
    ("v1", "Service", true),
    ("v1", "ServiceAccount", true),
    ("policy/v1", "PodDisruptionBudget", true),
    ("monitoring.coreos.com/v1", "ServiceMonitor", true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
];

fn of_kind<'a>(objects: &'a [Object], kind: &str) -> Vec<&'a Object> {
    objects.iter().filter(|o| o.kind() == kind).collect()
}

fn pod_labels(workload: &Object) -> BTreeMap<String, String> {
    string_map(
        &workload.value["spec"]["template"]["metadata"]["labels"],
        &format!("{}: spec.template.metadata.labels", workload.name()),
    )
}

fn container_ports(workload: &Object) -> BTreeMap<String, u64> {
    let mut ports = BTreeMap::new();
    for c in workload.value["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for p in c["ports"].as_array().into_iter().flatten() {
            ports.insert(
                s(&p["name"], "port name").to_string(),
                p["containerPort"].as_u64().expect("containerPort"),
            );
        }
    }
    ports
}

/// Checks every chart invariant that holds whatever the values.
fn check_objects(objects: &[Object]) {
    let mut seen = BTreeSet::new();
    for o in objects {
        let v = &o.value;
        let where_ = format!("{}: {} {}", o.template, o.kind(), o.name());
        let api = s(&v["apiVersion"], &format!("{where_}: apiVersion"));
        let kind = s(&v["kind"], &format!("{}: kind", o.template));
        let Some(&(_, _, namespaced)) = KINDS.iter().find(|(a, k, _)| *a == api && *k == kind)
        else {
            panic!("{where_}: unexpected apiVersion/kind {api}/{kind}");
        };
        let name = s(&v["metadata"]["name"], &format!("{where_}: metadata.name"));
        assert!(is_dns_label(name), "{where_}: name is not a DNS label");
        assert!(
            seen.insert((kind.to_string(), name.to_string())),
            "{where_}: twice"
        );
        if namespaced {
            assert_eq!(
                v["metadata"]["namespace"],
                json!(NAMESPACE),
                "{where_}: namespace"
            );
        } else {
            assert!(
                v["metadata"].get("namespace").is_none(),
                "{where_}: cluster-scoped"
            );
        }
        let labels = string_map(&v["metadata"]["labels"], &format!("{where_}: labels"));
        assert_eq!(
            labels.get("app.kubernetes.io/instance").map(String::as_str),
            Some(RELEASE),
            "{where_}"
        );
        for (k, val) in &labels {
            assert!(
                is_label_value(val),
                "{where_}: label {k}={val:?} is not a valid label value"
            );
        }
        if kind == "StatefulSet" || kind == "Deployment" {
            let selector = string_map(
                &v["spec"]["selector"]["matchLabels"],
                &format!("{where_}: selector"),
            );
            assert!(
                selects(&selector, &pod_labels(o)),
                "{where_}: selector does not match its pods"
            );
            let pod = &v["spec"]["template"]["spec"];
            let containers = pod["containers"]
                .as_array()
                .unwrap_or_else(|| panic!("{where_}: containers"));
            assert!(!containers.is_empty(), "{where_}: no container");
            for c in containers {
                s(&c["name"], &format!("{where_}: container name"));
                assert!(
                    s(&c["image"], &format!("{where_}: image")).starts_with("fleetq:"),
                    "{where_}: image"
                );
                assert_eq!(
                    c["securityContext"]["allowPrivilegeEscalation"],
                    json!(false),
                    "{where_}"
                );
                assert_eq!(
                    c["securityContext"]["readOnlyRootFilesystem"],
                    json!(true),
                    "{where_}"
                );
            }
            assert_eq!(
                pod["securityContext"]["runAsNonRoot"],
                json!(true),
                "{where_}"
            );
            let sa = s(
                &pod["serviceAccountName"],
                &format!("{where_}: serviceAccountName"),
            );
            assert!(
                objects
                    .iter()
                    .any(|x| x.kind() == "ServiceAccount" && x.name() == sa),
                "{where_}: ServiceAccount {sa} is not part of the release"
            );
            for (k, val) in pod_labels(o) {
                assert!(is_label_value(&val), "{where_}: pod label {k}={val:?}");
            }
        }
    }

    // Services select pods of the release and target their named ports.
    let workloads: Vec<&Object> = objects
        .iter()
        .filter(|o| o.kind() == "StatefulSet" || o.kind() == "Deployment")
        .collect();
    for svc in of_kind(objects, "Service") {
        let selector = string_map(&svc.value["spec"]["selector"], "Service selector");
        let targets: Vec<&&Object> = workloads
            .iter()
            .filter(|w| selects(&selector, &pod_labels(w)))
            .collect();
        assert_eq!(
            targets.len(),
            1,
            "Service {} selects one workload's pods",
            svc.name()
        );
        let ports = container_ports(targets[0]);
        for p in svc.value["spec"]["ports"]
            .as_array()
            .expect("Service ports")
        {
            let target = s(&p["targetPort"], "targetPort");
            assert!(
                ports.contains_key(target),
                "Service {}: targetPort {target} is no container port",
                svc.name()
            );
            assert_eq!(
                p["port"].as_u64(),
                ports.get(target).copied(),
                "Service {}: port {target}",
                svc.name()
            );
        }
    }
    for pdb in of_kind(objects, "PodDisruptionBudget") {
        let selector = string_map(
            &pdb.value["spec"]["selector"]["matchLabels"],
            "PDB selector",
        );
        let sts = of_kind(objects, "StatefulSet");
        assert!(
            sts.iter().any(|w| selects(&selector, &pod_labels(w))),
            "PDB {} selects the servers",
            pdb.name()
        );
    }
    for sm in of_kind(objects, "ServiceMonitor") {
        let selector = string_map(
            &sm.value["spec"]["selector"]["matchLabels"],
            "ServiceMonitor selector",
        );
        let services: Vec<&Object> = of_kind(objects, "Service")
            .into_iter()
            .filter(|svc| {
                selects(
                    &selector,
                    &string_map(&svc.value["metadata"]["labels"], "labels"),
                )
            })
            .collect();
        assert_eq!(
            services.len(),
            1,
            "ServiceMonitor {} selects one Service (not the headless one too)",
            sm.name()
        );
        assert_ne!(services[0].value["spec"]["clusterIP"], json!("None"));
        let endpoints = sm.value["spec"]["endpoints"].as_array().expect("endpoints");
        assert!(!endpoints.is_empty());
        for e in endpoints {
            assert_eq!(e["path"], json!("/metrics"));
            let port = s(&e["port"], "endpoint port");
            assert!(
                services[0].value["spec"]["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == json!(port)),
                "ServiceMonitor port {port} is a port of Service {}",
                services[0].name()
            );
        }
        assert_eq!(
            sm.value["spec"]["namespaceSelector"]["matchNames"],
            json!([NAMESPACE])
        );
    }
    for binding in of_kind(objects, "ClusterRoleBinding") {
        let role = s(&binding.value["roleRef"]["name"], "roleRef.name");
        assert_eq!(binding.value["roleRef"]["kind"], json!("ClusterRole"));
        assert!(
            of_kind(objects, "ClusterRole")
                .iter()
                .any(|r| r.name() == role),
            "roleRef {role} is rendered"
        );
        for subject in binding.value["subjects"].as_array().expect("subjects") {
            assert_eq!(subject["kind"], json!("ServiceAccount"));
            assert_eq!(subject["namespace"], json!(NAMESPACE));
            let sa = s(&subject["name"], "subject name");
            assert!(
                of_kind(objects, "ServiceAccount")
                    .iter()
                    .any(|x| x.name() == sa),
                "subject {sa} is rendered"
            );
        }
    }
}

fn kinds(objects: &[Object]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for o in objects {
        *counts.entry(o.kind().to_string()).or_insert(0) += 1;
    }
    counts
}

// ---------------------------------------------------------------------
// Command lines, checked by the real binary.

/// `fleetq ARGS --help` exits 0 only when clap accepts every flag and
/// value in ARGS (it stops at --help before running anything).
fn assert_cli_accepts(args: &[String], what: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetq"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run fleetq");
    assert!(
        out.status.success(),
        "{what}: `fleetq {}` is refused: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of `--flag VALUE` or `--flag=VALUE` in `args`.
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&prefix).map(str::to_string)
        }
    })
}

/// The server pod's command run through /bin/sh with a stand-in `fleetq`
/// that prints its arguments: what `fleetq` is really started with in
/// pod `hostname`.
fn server_argv(sts: &Object, hostname: &str) -> Vec<String> {
    let c = &sts.value["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = c["command"]
        .as_array()
        .expect("server command")
        .iter()
        .map(|v| s(v, "command").to_string())
        .collect();
    let args: Vec<String> = c["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| s(v, "args").to_string())
        .collect();
    assert_eq!(command[..2], ["/bin/sh".to_string(), "-ec".to_string()]);
    let dir = tempfile::tempdir().expect("tempdir");
    let stub = dir.path().join("fleetq");
    std::fs::write(
        &stub,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
    )
    .expect("stub");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("/bin/sh")
        .args(&command[1..])
        .args(&args)
        .env("PATH", path)
        .env("HOSTNAME", hostname)
        .output()
        .expect("run /bin/sh");
    assert!(
        out.status.success(),
        "server command: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

fn agent_args(deploy: &Object) -> Vec<String> {
    deploy.value["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("agent args")
        .iter()
        .map(|v| s(v, "arg").to_string())
        .collect()
}

fn env_var(deploy: &Object, name: &str) -> Option<String> {
    deploy.value["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == json!(name))
        .map(|e| s(&e["value"], name).to_string())
}

fn write_rendered(scenario: &str, objects: &[Object]) {
    if let Some(dir) = std::env::var_os("FLEETQ_DEPLOY_RENDER_DIR") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("render dir");
        let values: Vec<&Json> = objects.iter().map(|o| &o.value).collect();
        std::fs::write(
            dir.join(format!("{scenario}.json")),
            serde_json::to_string_pretty(&values).expect("json"),
        )
        .expect("write rendered");
    }
}

fn ci_values(name: &str) -> Json {
    yaml_one(&read(&format!("{CHART}/ci/{name}")), name)
}

// ---------------------------------------------------------------------
// The chart.

/// A server or agent pod's gRPC security: with `tls.insecure`,
/// `--insecure` and no Secret; otherwise `--tls-dir` is where the
/// release's TLS Secret (`tls.secretName`, default `<fullname>-tls`) is
/// mounted, read-only.
fn check_tls(workload: &Object, args: &[String], values: &Json) {
    let what = workload.name();
    let pod = &workload.value["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    let secret = volumes.iter().find(|v| v["secret"].is_object());
    let insecure = args.iter().any(|a| a == "--insecure");
    if values["tls"]["insecure"] == json!(true) {
        assert!(insecure, "{what}: tls.insecure passes --insecure: {args:?}");
        assert_eq!(flag_value(args, "--tls-dir"), None, "{what}: {args:?}");
        assert!(secret.is_none(), "{what}: no TLS Secret when insecure");
        return;
    }
    assert!(
        !insecure,
        "{what}: mutual TLS unless tls.insecure: {args:?}"
    );
    let dir =
        flag_value(args, "--tls-dir").unwrap_or_else(|| panic!("{what}: --tls-dir: {args:?}"));
    let secret = secret.unwrap_or_else(|| panic!("{what}: no Secret volume for --tls-dir"));
    let want = match values["tls"]["secretName"].as_str() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => match values["fullnameOverride"].as_str() {
            Some(name) if !name.is_empty() => format!("{name}-tls"),
            _ => format!("{RELEASE}-fleetq-tls"),
        },
    };
    assert_eq!(secret["secret"]["secretName"], json!(want), "{what}");
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == secret["name"])
        .unwrap_or_else(|| panic!("{what}: the TLS Secret is not mounted"));
    assert_eq!(
        mount["mountPath"],
        json!(dir),
        "{what}: --tls-dir is the Secret"
    );
    assert_eq!(mount["readOnly"], json!(true), "{what}");
}

/// The servers: a StatefulSet of 3 with claims, headless peers Service,
/// client Service, PDB; each pod starts `fleetq server` with its own id,
/// the same three initial voters and its data on its claim.
fn check_servers(objects: &[Object], values: &Json) {
    let fullname = match values["fullnameOverride"].as_str() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("{RELEASE}-fleetq"),
    };
    assert_eq!(
        of_kind(objects, "StatefulSet")
            .first()
            .map(|s| s.name().to_string()),
        Some(format!("{fullname}-server"))
    );
    let sts = of_kind(objects, "StatefulSet");
    assert_eq!(sts.len(), 1, "one server StatefulSet");
    let sts = sts[0];
    let spec = &sts.value["spec"];
    assert_eq!(spec["replicas"], json!(3), "three Raft voters");
    assert_eq!(spec["podManagementPolicy"], json!("Parallel"));
    let claims = spec["volumeClaimTemplates"]
        .as_array()
        .expect("volumeClaimTemplates");
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert!(s(
        &claim["spec"]["resources"]["requests"]["storage"],
        "storage"
    )
    .ends_with("Gi"));
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    let claim_name = s(&claim["metadata"]["name"], "claim name");
    let mounts = &spec["template"]["spec"]["containers"][0]["volumeMounts"];
    let mount = mounts
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == json!(claim_name))
        .expect("the claim is mounted");
    let mount_path = s(&mount["mountPath"], "mountPath");

    let peers_svc = s(&spec["serviceName"], "serviceName");
    let headless = of_kind(objects, "Service")
        .into_iter()
        .find(|x| x.name() == peers_svc)
        .expect("the StatefulSet's serviceName is a rendered Service");
    assert_eq!(
        headless.value["spec"]["clusterIP"],
        json!("None"),
        "peers Service is headless"
    );
    assert_eq!(
        headless.value["spec"]["publishNotReadyAddresses"],
        json!(true)
    );
    let client = of_kind(objects, "Service")
        .into_iter()
        .find(|x| x.name() == fullname)
        .expect("client Service");
    assert_ne!(client.value["spec"]["clusterIP"], json!("None"));
    let client_ports: BTreeSet<&str> = client.value["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| s(&p["name"], "port name"))
        .collect();
    let want: BTreeSet<&str> = if values["server"]["http"]["enabled"] == json!(true) {
        BTreeSet::from(["grpc", "http"])
    } else {
        BTreeSet::from(["grpc"])
    };
    assert_eq!(client_ports, want);

    let pdb = of_kind(objects, "PodDisruptionBudget");
    assert_eq!(pdb.len(), 1, "one PodDisruptionBudget");
    assert_eq!(
        pdb[0].value["spec"]["minAvailable"],
        json!(2),
        "a quorum of 3 stays up"
    );

    let port = values["server"]["port"].as_u64().expect("server.port");
    let host = |i: u64| {
        format!(
            "{}-{i}.{peers_svc}.{NAMESPACE}.svc.cluster.local:{port}",
            sts.name()
        )
    };
    let expected_peers: Vec<String> = (0..3).map(|i| format!("{}={}", i + 1, host(i))).collect();
    for ordinal in 0..3u64 {
        let argv = server_argv(sts, &format!("{}-{ordinal}", sts.name()));
        assert_eq!(argv.first().map(String::as_str), Some("server"), "{argv:?}");
        let id = (ordinal + 1).to_string();
        assert_eq!(
            flag_value(&argv, "--id").as_deref(),
            Some(id.as_str()),
            "{argv:?}"
        );
        assert_eq!(
            flag_value(&argv, "--advertise"),
            Some(host(ordinal)),
            "{argv:?}"
        );
        assert_eq!(
            flag_value(&argv, "--listen"),
            Some(format!("0.0.0.0:{port}"))
        );
        let peers = flag_value(&argv, "--peers").expect("--peers");
        assert_eq!(
            peers.split(',').collect::<Vec<_>>(),
            expected_peers,
            "{argv:?}"
        );
        let data_dir = flag_value(&argv, "--data-dir").expect("--data-dir");
        assert!(
            Path::new(&data_dir).starts_with(mount_path),
            "--data-dir {data_dir} is on the claim mounted at {mount_path}"
        );
        let http = values["server"]["http"]["port"]
            .as_u64()
            .expect("http.port");
        let http_listen = flag_value(&argv, "--http-listen");
        if values["server"]["http"]["enabled"] == json!(true) {
            assert_eq!(http_listen, Some(format!("0.0.0.0:{http}")), "{argv:?}");
            assert_eq!(container_ports(sts).get("http"), Some(&http));
        } else {
            assert_eq!(http_listen, None, "{argv:?}");
        }
        check_tls(sts, &argv, values);
        assert_cli_accepts(&argv, &format!("server pod {ordinal}"));
    }
}

/// One Deployment per agent, started with the kubernetes inventory and
/// executor under a ServiceAccount whose ClusterRole covers Nodes, Jobs
/// (and their status), pods (and their logs) and Events.
fn check_agents(objects: &[Object], values: &Json) {
    let agents = values["agents"].as_array().cloned().unwrap_or_default();
    let deployments = of_kind(objects, "Deployment");
    assert_eq!(deployments.len(), agents.len(), "one Deployment per agent");
    if agents.is_empty() {
        for kind in ["ClusterRole", "ClusterRoleBinding"] {
            assert!(
                of_kind(objects, kind).is_empty(),
                "no {kind} without agents"
            );
        }
        return;
    }
    let roles = of_kind(objects, "ClusterRole");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].value["rules"].as_array().expect("rules");
    let allows = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.contains(&json!(group)))
                && r["resources"]
                    .as_array()
                    .is_some_and(|x| x.contains(&json!(resource)))
                && r["verbs"]
                    .as_array()
                    .is_some_and(|x| x.contains(&json!(verb)))
        })
    };
    for verb in ["get", "list", "watch"] {
        assert!(allows("", "nodes", verb), "nodes {verb}");
        assert!(allows("", "pods", verb), "pods {verb}");
    }
    // Every verb the agent's code uses: the executor patches a user's Job
    // to unsuspend it, `fleetq logs` reads pod logs, the front door
    // writes a copy's status onto jobs/status and publishes Events.
    for verb in ["create", "get", "list", "watch", "patch", "delete"] {
        assert!(allows("batch", "jobs", verb), "batch jobs {verb}");
    }
    assert!(allows("batch", "jobs/status", "patch"), "jobs/status patch");
    // JobSet workloads run as JobSets.
    for verb in ["create", "get", "list", "watch", "delete"] {
        assert!(allows("jobset.x-k8s.io", "jobsets", verb), "jobsets {verb}");
    }
    // Pod workloads (plain Pods, Kueue pod groups) run as pods.
    for verb in ["create", "delete"] {
        assert!(allows("", "pods", verb), "pods {verb}");
    }
    assert!(allows("", "pods/log", "get"), "pods/log get");
    for verb in ["create", "patch"] {
        assert!(allows("events.k8s.io", "events", verb), "events {verb}");
    }
    let binding = of_kind(objects, "ClusterRoleBinding");
    assert_eq!(binding.len(), 1);
    let sa = s(&binding[0].value["subjects"][0]["name"], "subject");

    let server_enabled = values["server"]["enabled"] == json!(true);
    for agent in &agents {
        let cluster = s(&agent["name"], "agents[].name");
        let d = deployments
            .iter()
            .find(|d| d.value["metadata"]["labels"]["fleetq.dev/cluster"] == json!(cluster))
            .unwrap_or_else(|| panic!("no Deployment for agent {cluster}"));
        assert_eq!(d.value["spec"]["replicas"], json!(1));
        assert_eq!(d.value["spec"]["strategy"]["type"], json!("Recreate"));
        assert_eq!(
            d.value["spec"]["template"]["spec"]["serviceAccountName"],
            json!(sa)
        );
        let args = agent_args(d);
        assert_eq!(args.first().map(String::as_str), Some("agent"));
        assert_eq!(flag_value(&args, "--cluster").as_deref(), Some(cluster));
        assert_eq!(
            flag_value(&args, "--inventory").as_deref(),
            Some("kubernetes")
        );
        assert_eq!(
            flag_value(&args, "--executor").as_deref(),
            Some("kubernetes")
        );
        let flavors: Vec<&String> = args.iter().filter(|a| a.starts_with("--flavor=")).collect();
        assert_eq!(
            flavors.len(),
            agent["flavors"].as_array().map_or(0, Vec::len),
            "a --flavor per flavors entry"
        );
        assert!(
            !flavors.is_empty(),
            "agent {cluster}: the kubernetes inventory needs flavors"
        );
        assert_eq!(
            flag_value(&args, "--node-selector"),
            agent["nodeSelector"].as_str().map(str::to_string)
        );
        assert_eq!(
            args.contains(&"--no-follow-redirects".to_string()),
            agent["noFollowRedirects"] == json!(true)
        );
        check_tls(d, &args, values);
        assert_cli_accepts(&args, &format!("agent {cluster}"));
        let servers = env_var(d, "FLEETQ_SERVER").expect("FLEETQ_SERVER");
        match agent["servers"].as_array() {
            Some(list) => {
                let list: Vec<&str> = list.iter().map(|v| s(v, "servers[]")).collect();
                assert_eq!(servers, list.join(","));
            }
            None => {
                assert!(
                    server_enabled,
                    "agent {cluster}: no servers and none in this release"
                );
                let sts = of_kind(objects, "StatefulSet");
                assert_eq!(servers.split(',').count(), 3, "{servers}");
                for (i, addr) in servers.split(',').enumerate() {
                    assert!(
                        addr.starts_with(&format!("{}-{i}.", sts[0].name())),
                        "{addr}"
                    );
                }
            }
        }
    }
}

#[test]
fn chart_renders_with_default_values() {
    let values = chart_values(&[&ci_values("default-values.yaml")]);
    let objects = render_chart(&values);
    write_rendered("default-values", &objects);
    check_objects(&objects);
    assert_eq!(
        kinds(&objects),
        BTreeMap::from([
            ("PodDisruptionBudget".to_string(), 1),
            ("Service".to_string(), 2),
            ("ServiceAccount".to_string(), 1),
            ("StatefulSet".to_string(), 1),
        ]),
        "no ServiceMonitor, agents or RBAC unless asked for"
    );
    check_servers(&objects, &values);
    check_agents(&objects, &values);
    // The kubelet asks the server itself whether it is alive and ready.
    let container =
        &of_kind(&objects, "StatefulSet")[0].value["spec"]["template"]["spec"]["containers"][0];
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ] {
        assert_eq!(
            container[probe]["httpGet"],
            json!({"path": path, "port": "http"}),
            "{probe}"
        );
    }
}

#[test]
fn chart_renders_a_fleet_with_service_monitor_and_two_agents() {
    let values = chart_values(&[&ci_values("fleet-values.yaml")]);
    assert_eq!(values["agents"].as_array().map(Vec::len), Some(2));
    let objects = render_chart(&values);
    write_rendered("fleet-values", &objects);
    check_objects(&objects);
    assert_eq!(
        kinds(&objects),
        BTreeMap::from([
            ("ClusterRole".to_string(), 1),
            ("ClusterRoleBinding".to_string(), 1),
            ("Deployment".to_string(), 2),
            ("PodDisruptionBudget".to_string(), 1),
            ("Service".to_string(), 2),
            ("ServiceAccount".to_string(), 2),
            ("ServiceMonitor".to_string(), 1),
            ("StatefulSet".to_string(), 1),
        ])
    );
    check_servers(&objects, &values);
    check_agents(&objects, &values);
    let sm = &of_kind(&objects, "ServiceMonitor")[0].value;
    assert_eq!(sm["metadata"]["labels"]["release"], json!("prometheus"));
    let sts = &of_kind(&objects, "StatefulSet")[0];
    let argv = server_argv(sts, &format!("{}-0", sts.name()));
    assert_eq!(flag_value(&argv, "--lease-ttl").as_deref(), Some("10s"));
    assert_eq!(flag_value(&argv, "--wait-for-ready").as_deref(), Some("5m"));
    let spec = &sts.value["spec"];
    assert_eq!(
        spec["volumeClaimTemplates"][0]["spec"]["storageClassName"],
        json!("fast-ssd")
    );
    assert!(spec["template"]["spec"]["affinity"]["podAntiAffinity"]
        .get("requiredDuringSchedulingIgnoredDuringExecution")
        .is_some());
    let west = of_kind(&objects, "Deployment")
        .into_iter()
        .find(|d| d.name().ends_with("-west"))
        .expect("west agent");
    assert_eq!(
        flag_value(&agent_args(west), "--lease-policy").as_deref(),
        Some("keep")
    );
}

#[test]
fn chart_renders_a_member_cluster_with_only_its_agent() {
    let values = chart_values(&[&ci_values("agents-only-values.yaml")]);
    let objects = render_chart(&values);
    write_rendered("agents-only-values", &objects);
    check_objects(&objects);
    assert_eq!(
        kinds(&objects),
        BTreeMap::from([
            ("ClusterRole".to_string(), 1),
            ("ClusterRoleBinding".to_string(), 1),
            ("Deployment".to_string(), 1),
            ("ServiceAccount".to_string(), 1),
        ])
    );
    check_agents(&objects, &values);
}

#[test]
fn chart_without_http_probes_tcp_and_has_nothing_to_scrape() {
    // For a fleetq without --http-listen; also extra flags, a log filter
    // and a fixed name.
    let over = json!({
        "server": {"http": {"enabled": false},
                   "extraArgs": ["--snapshot-every=500"], "logFilter": "debug"},
        "serviceMonitor": {"enabled": true},
        "fullnameOverride": "fq",
        // Plaintext gRPC (check_servers: --insecure, no TLS Secret).
        "tls": {"insecure": true},
    });
    let values = chart_values(&[&over]);
    let objects = render_chart(&values);
    check_objects(&objects);
    check_servers(&objects, &values);
    assert!(
        of_kind(&objects, "ServiceMonitor").is_empty(),
        "no ServiceMonitor without /metrics"
    );
    let sts = of_kind(&objects, "StatefulSet")[0];
    assert_eq!(sts.name(), "fq-server");
    let argv = server_argv(sts, "fq-server-2");
    assert_eq!(flag_value(&argv, "--id").as_deref(), Some("3"));
    assert_eq!(
        argv.last().map(String::as_str),
        Some("--snapshot-every=500")
    );
    assert!(!container_ports(sts).contains_key("http"));
    let container = &sts.value["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["env"],
        json!([{"name": "RUST_LOG", "value": "debug"}])
    );
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert_eq!(
            container[probe]["tcpSocket"],
            json!({"port": "grpc"}),
            "{probe}"
        );
    }
}

#[test]
fn renderer_follows_helm_semantics() {
    // The functions the chart relies on, as Helm (Sprig) defines them.
    let cases = [
        (r#"{{ "a\"b" | quote }}"#, r#""a\"b""#),
        (r#"{{ default "x" "" }}|{{ default "x" "y" }}"#, "x|y"),
        (r#"{{ "abcdef-" | trunc 7 | trimSuffix "-" }}"#, "abcdef"),
        (r#"{{ contains "fleetq" "my-fleetq" }}"#, "true"),
        (
            r#"{{ range $i, $n := until 3 }}{{ if $i }},{{ end }}{{ add1 $i }}{{ end }}"#,
            "1,2,3",
        ),
        (r#"{{ "a\nb" | nindent 2 }}"#, "\n  a\n  b"),
        (r#"{{ join "," .list }}"#, "x,y"),
        (r#"{{ toYaml .map }}"#, "a: 1\nb:\n- c"),
    ];
    for (template, want) in cases {
        let mut t = Template::with_name("t");
        t.add_funcs(FUNCS);
        t.parse(template).expect(template);
        let ctx = to_gtmpl(&json!({"list": ["x", "y"], "map": {"b": ["c"], "a": 1}}));
        assert_eq!(
            t.render(&Context::from(ctx)).expect(template),
            want,
            "{template}"
        );
    }
    // A function Helm has but this renderer does not is a parse error,
    // not a silently empty string.
    let mut t = Template::with_name("t");
    t.add_funcs(FUNCS);
    assert!(t.parse("{{ b64enc \"x\" }}").is_err());
}

// ---------------------------------------------------------------------
// docker compose.

#[test]
fn compose_file_runs_three_servers_and_two_agents() {
    let compose = yaml_one(
        &read("deploy/compose/docker-compose.yaml"),
        "docker-compose.yaml",
    );
    let services = compose["services"].as_object().expect("services");
    let command = |name: &str| -> Vec<String> {
        services[name]["command"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: command is a list"))
            .iter()
            .map(|v| s(v, "command").to_string())
            .collect()
    };
    let servers: Vec<&String> = services
        .keys()
        .filter(|n| command(n).first().map(String::as_str) == Some("server"))
        .collect();
    let agents: Vec<&String> = services
        .keys()
        .filter(|n| command(n).first().map(String::as_str) == Some("agent"))
        .collect();
    assert_eq!(servers.len(), 3, "three servers: {servers:?}");
    assert_eq!(agents.len(), 2, "two agents: {agents:?}");

    let volumes = compose["volumes"].as_object().expect("named volumes");
    let mut ids = BTreeSet::new();
    let mut host_ports = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    let mut peer_lists = BTreeSet::new();
    for name in &servers {
        let svc = &services[name.as_str()];
        let args = command(name);
        assert_cli_accepts(&args, name);
        ids.insert(flag_value(&args, "--id").expect("--id"));
        let advertise = flag_value(&args, "--advertise").expect("--advertise");
        assert!(
            advertise.starts_with(&format!("{name}:")),
            "{name} advertises its service name: {advertise}"
        );
        addresses.insert(advertise);
        peer_lists.insert(flag_value(&args, "--peers").expect("--peers"));
        let http = flag_value(&args, "--http-listen").expect("--http-listen: /metrics");
        let http_port = http.rsplit(':').next().unwrap_or_default().to_string();
        assert!(
            svc["ports"].as_array().expect("ports").iter().any(|p| p
                .as_str()
                .is_some_and(|p| p.ends_with(&format!(":{http_port}")))),
            "{name}: the HTTP port {http_port} is published"
        );
        let data_dir = flag_value(&args, "--data-dir").expect("--data-dir");
        let mounted = svc["volumes"].as_array().expect("volumes").iter().any(|v| {
            let v = s(v, "volume");
            let (volume, path) = v.split_once(':').expect("VOLUME:PATH");
            volumes.contains_key(volume)
                && Path::new(&data_dir).starts_with(path.trim_end_matches(":ro"))
        });
        assert!(
            mounted,
            "{name}: --data-dir {data_dir} is on a named volume"
        );
        for p in svc["ports"].as_array().expect("ports") {
            // [HOST_IP:]HOST_PORT:CONTAINER_PORT
            assert!(
                host_ports.insert(
                    s(p, "port")
                        .rsplit_once(':')
                        .map(|(host, _)| host)
                        .unwrap_or_default()
                        .to_string()
                ),
                "{name}: host port {p} twice"
            );
        }
        assert!(svc["build"]["dockerfile"].is_string() || svc["image"].is_string());
    }
    assert_eq!(
        ids,
        BTreeSet::from(["1".to_string(), "2".to_string(), "3".to_string()])
    );
    assert_eq!(
        peer_lists.len(),
        1,
        "every server starts with the same voters"
    );
    let peers: BTreeSet<String> = peer_lists
        .iter()
        .next()
        .expect("peers")
        .split(',')
        .map(|p| p.split_once('=').expect("ID=ADDR").1.to_string())
        .collect();
    assert_eq!(
        peers, addresses,
        "--peers names every server as it advertises itself"
    );

    for name in &agents {
        let args = command(name);
        assert_cli_accepts(&args, name);
        let svc = &services[name.as_str()];
        let env = svc["environment"].as_object().expect("environment");
        let listed: BTreeSet<String> = s(&env["FLEETQ_SERVER"], "FLEETQ_SERVER")
            .split(',')
            .map(str::to_string)
            .collect();
        assert_eq!(
            listed, addresses,
            "{name}: FLEETQ_SERVER lists every server"
        );
        assert!(flag_value(&args, "--cluster").is_some());
        assert!(
            flag_value(&args, "--static-inventory").is_some(),
            "{name}: simulated GPUs"
        );
        assert_eq!(
            flag_value(&args, "--executor").as_deref(),
            Some("simulated")
        );
    }
    let clusters: BTreeSet<String> = agents
        .iter()
        .map(|a| flag_value(&command(a), "--cluster").expect("--cluster"))
        .collect();
    assert_eq!(clusters.len(), 2, "two distinct clusters");

    // Everything else is a CLI command the binary accepts, and every
    // build points at the Dockerfile.
    for (name, svc) in services {
        if !servers.contains(&name) && !agents.contains(&name) {
            assert_cli_accepts(&command(name), name);
        }
        let build = &svc["build"];
        let context = repo()
            .join("deploy/compose")
            .join(s(&build["context"], "build.context"));
        assert!(
            context
                .join(s(&build["dockerfile"], "build.dockerfile"))
                .is_file(),
            "{name}: Dockerfile"
        );
        for v in svc["volumes"].as_array().into_iter().flatten() {
            let source = s(v, "volume").split(':').next().unwrap_or_default();
            if source.starts_with('.') {
                assert!(
                    repo().join("deploy/compose").join(source).exists(),
                    "{name}: {source}"
                );
            }
        }
    }
    let dockerfile = read("deploy/compose/Dockerfile");
    assert!(dockerfile.contains("cargo build --release --locked --bin fleetq"));
    assert!(dockerfile.matches("\nFROM ").count() >= 2, "multi-stage");
}

// ---------------------------------------------------------------------
// systemd.

/// `[Section]` -> key -> values (a key may repeat).
fn unit_sections(text: &str, what: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut sections: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.to_string());
            sections.entry(name.to_string()).or_default();
            continue;
        }
        let section = current
            .clone()
            .unwrap_or_else(|| panic!("{what}:{}: a setting before any [Section]", n + 1));
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{what}:{}: not KEY=VALUE: {line}", n + 1));
        sections
            .entry(section)
            .or_default()
            .entry(key.trim().to_string())
            .or_default()
            .push(value.trim().to_string());
    }
    sections
}

fn check_unit(file: &str, subcommand: &str) -> Vec<String> {
    let text = read(&format!("deploy/systemd/{file}"));
    let unit = unit_sections(&text, file);
    for section in ["Unit", "Service", "Install"] {
        assert!(unit.contains_key(section), "{file}: [{section}]");
    }
    let service = &unit["Service"];
    let one = |key: &str| -> &str {
        service
            .get(key)
            .and_then(|v| v.last())
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{file}: [Service] {key}="))
    };
    assert_eq!(one("Restart"), "on-failure", "{file}");
    assert_eq!(one("NoNewPrivileges"), "yes", "{file}");
    assert!(
        ["yes", "full", "strict"].contains(&one("ProtectSystem")),
        "{file}: ProtectSystem"
    );
    assert!(!one("StateDirectory").is_empty(), "{file}: StateDirectory");
    assert_eq!(
        unit["Install"]["WantedBy"],
        vec!["multi-user.target".to_string()],
        "{file}"
    );
    let exec: Vec<String> = one("ExecStart")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(
        exec[0].starts_with('/') && exec[0].ends_with("/fleetq"),
        "{file}: ExecStart names fleetq"
    );
    assert_eq!(exec.get(1).map(String::as_str), Some(subcommand), "{file}");
    assert_cli_accepts(&exec[1..], file);
    exec
}

#[test]
fn systemd_units_are_complete_and_hardened() {
    let server = check_unit("fleetq-server.service", "server");
    let agent = check_unit("fleetq-agent.service", "agent");
    // Mutual TLS from files systemd hands over (LoadCredential=, in %d).
    for (file, exec) in [
        ("fleetq-server.service", &server),
        ("fleetq-agent.service", &agent),
    ] {
        let unit = unit_sections(&read(&format!("deploy/systemd/{file}")), file);
        let loaded: BTreeSet<&str> = unit["Service"]
            .get("LoadCredential")
            .into_iter()
            .flatten()
            .filter_map(|c| c.split_once(':').map(|(id, _)| id))
            .collect();
        for flag in ["--tls-ca", "--tls-cert", "--tls-key"] {
            let path = flag_value(exec, flag).unwrap_or_else(|| panic!("{file}: {flag}"));
            let id = path
                .strip_prefix("%d/")
                .unwrap_or_else(|| panic!("{file}: {flag} {path} is not a credential"));
            assert!(loaded.contains(id), "{file}: no LoadCredential={id}:...");
        }
        assert!(!exec.contains(&"--insecure".to_string()), "{file}");
    }
    assert_eq!(
        flag_value(&server, "--config").as_deref(),
        Some("/etc/fleetq/server.toml")
    );
    assert_eq!(
        flag_value(&agent, "--config").as_deref(),
        Some("/etc/fleetq/agent.toml")
    );
    // The example agent config is one the agent accepts as it is.
    let config = fleetq_agent::AgentConfig::load(&repo().join("deploy/systemd/agent.toml"))
        .unwrap_or_else(|e| panic!("deploy/systemd/agent.toml: {e}"));
    assert_eq!(config.servers.len(), 3);
    let state_dir = config.state_dir.as_ref().expect("state_dir");
    let unit = unit_sections(&read("deploy/systemd/fleetq-agent.service"), "agent unit");
    assert_eq!(
        state_dir,
        &Path::new("/var/lib").join(&unit["Service"]["StateDirectory"][0]),
        "the process executor keeps its records in the unit's StateDirectory"
    );
}

#[test]
fn systemd_example_server_config_starts_a_node() {
    // The example config as `fleetq server --config` reads it, with the
    // listen address and data directory moved somewhere harmless.
    let dir = tempfile::tempdir().expect("tempdir");
    let text = read("deploy/systemd/server.toml");
    let config: toml::Table = toml::from_str(&text).expect("server.toml is TOML");
    let data_dir = config["data_dir"].as_str().expect("data_dir");
    let unit = unit_sections(&read("deploy/systemd/fleetq-server.service"), "server unit");
    assert!(
        Path::new(data_dir)
            .starts_with(Path::new("/var/lib").join(&unit["Service"]["StateDirectory"][0])),
        "data_dir {data_dir} is in the unit's StateDirectory"
    );
    // With the unit's TLS flags, its credentials directory (%d) a
    // temporary one holding a CA and this node's certificate and key,
    // named as the unit's LoadCredential= lines name them.
    let credentials = dir.path().join("credentials");
    let id = config["id"].as_integer().expect("id").to_string();
    let certs = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetq"))
            .args(["certs"])
            .args(args)
            .arg("--dir")
            .arg(&credentials)
            .output()
            .expect("run fleetq certs");
        assert!(
            out.status.success(),
            "fleetq certs {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    certs(&["init"]);
    certs(&["issue", "--name", "node", "node", "--id", &id]);
    let exec = check_unit("fleetq-server.service", "server");
    let tls: Vec<String> = exec
        .iter()
        .skip_while(|a| !a.starts_with("--tls"))
        .map(|a| a.replace("%d", credentials.to_str().expect("utf-8 path")))
        .collect();
    assert_eq!(
        tls.len(),
        6,
        "--tls-ca, --tls-cert and --tls-key at the end: {exec:?}"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetq"))
        .args(["server", "--config"])
        .arg(repo().join("deploy/systemd/server.toml"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path().join("node"))
        .args(&tls)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fleetq server");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut started = false;
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains("listening") => {
                started = true;
                break;
            }
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    assert!(
        started,
        "fleetq server --config deploy/systemd/server.toml did not start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------
// Grafana.

/// Every metric fleetq's servers export at /metrics
/// (crates/fleetq-server/src/metrics.rs).
const METRICS: &[&str] = &[
    "kueue_pending_workloads",
    "kueue_admitted_active_workloads",
    "kueue_admission_wait_time_seconds",
    "kueue_admission_attempts_total",
    "kueue_admission_attempt_duration_seconds",
    "kueue_evicted_workloads_total",
    "kueue_preempted_workloads_total",
    "kueue_cluster_queue_resource_usage",
    "kueue_cluster_queue_resource_reservation",
    "kueue_cluster_queue_nominal_quota",
    "kueue_cluster_queue_borrowing_limit",
    "kueue_cluster_queue_lending_limit",
    "kueue_cluster_queue_weighted_share",
    "kueue_cohort_weighted_share",
    "fleetq_raft_term",
    "fleetq_raft_leader",
    "fleetq_raft_is_leader",
    "fleetq_raft_last_log_index",
    "fleetq_raft_commit_index",
    "fleetq_raft_applied_index",
    "fleetq_raft_append_latency_seconds",
    "fleetq_raft_snapshot_index",
    "fleetq_cluster_capacity",
    "fleetq_cluster_allocated",
    "fleetq_cluster_lease_age_seconds",
    "fleetq_admit_batch_rejected_decisions_total",
    "fleetq_finished_workloads_removed_total",
    "fleetq_quota_reserved_not_running",
    "fleetq_requests_refused_total",
];

/// Histograms: queried through their `_bucket` series.
const HISTOGRAMS: &[&str] = &[
    "kueue_admission_wait_time_seconds",
    "kueue_admission_attempt_duration_seconds",
    "fleetq_raft_append_latency_seconds",
];

/// The `kueue_*` / `fleetq_*` identifiers in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = (expr[i..].starts_with("kueue_") || expr[i..].starts_with("fleetq_"))
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if starts {
            let end = expr[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(expr.len(), |e| i + e);
            names.push(expr[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    names
}

fn collect_panels<'a>(panels: &'a [Json], out: &mut Vec<&'a Json>) {
    for p in panels {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            collect_panels(inner, out);
        }
    }
}

#[test]
fn grafana_dashboard_covers_every_metric() {
    let text = read("deploy/grafana/fleetq-dashboard.json");
    let dash: Json = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert!(
        dash["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion"
    );
    assert!(dash["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty() && u.len() <= 40));
    s(&dash["title"], "title");
    let vars = dash["templating"]["list"].as_array().expect("templating");
    assert!(
        vars.iter().any(|v| v["name"] == json!("DS_PROMETHEUS")
            && v["type"] == json!("datasource")
            && v["query"] == json!("prometheus")),
        "a Prometheus datasource variable DS_PROMETHEUS"
    );
    let var_names: BTreeSet<&str> = vars
        .iter()
        .map(|v| s(&v["name"], "variable name"))
        .collect();

    let mut panels = Vec::new();
    collect_panels(dash["panels"].as_array().expect("panels"), &mut panels);
    let mut ids = BTreeSet::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut bucket_queried: BTreeSet<String> = BTreeSet::new();
    for p in &panels {
        let title = s(&p["title"], "panel title");
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "{title}: duplicate id"
        );
        for key in ["h", "w", "x", "y"] {
            assert!(p["gridPos"][key].is_u64(), "{title}: gridPos.{key}");
        }
        assert!(
            p["gridPos"]["x"].as_u64().unwrap_or(0) + p["gridPos"]["w"].as_u64().unwrap_or(0) <= 24,
            "{title}: fits 24 columns"
        );
        if p["type"] == json!("row") {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"],
            json!("${DS_PROMETHEUS}"),
            "{title}: datasource"
        );
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: targets"));
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"],
                json!("${DS_PROMETHEUS}"),
                "{title}: target datasource"
            );
            let expr = s(&t["expr"], &format!("{title}: expr"));
            assert_eq!(
                expr.matches('(').count(),
                expr.matches(')').count(),
                "{title}: {expr}"
            );
            assert_eq!(
                expr.matches('{').count(),
                expr.matches('}').count(),
                "{title}: {expr}"
            );
            for var in expr.split('$').skip(1) {
                let name: String = var
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    name.starts_with("__") || var_names.contains(name.as_str()),
                    "{title}: ${name} is not a dashboard variable"
                );
            }
            for name in metric_names(expr) {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix).filter(|b| HISTOGRAMS.contains(b)))
                    .unwrap_or(&name);
                assert!(
                    METRICS.contains(&base),
                    "{title}: {name} is not a fleetq metric"
                );
                if name.ends_with("_bucket") {
                    bucket_queried.insert(base.to_string());
                }
                used.insert(base.to_string());
            }
        }
    }
    let missing: Vec<&&str> = METRICS.iter().filter(|m| !used.contains(**m)).collect();
    assert!(missing.is_empty(), "metrics no panel shows: {missing:?}");
    for h in HISTOGRAMS {
        assert!(
            bucket_queried.contains(*h),
            "{h}: quantiles from {h}_bucket"
        );
    }
}
