//! Visibility of pending workloads through a real `fleetq dev`: a full
//! ClusterQueue with six workloads of three priorities waiting in two
//! LocalQueues of two namespaces. `fleetq get pending` (gRPC) and the
//! Kueue-shaped HTTP API (on every node: reads pass the read barrier)
//! must list them in admission order with their positions, page with
//! limit/offset while reporting the total, and refuse bad requests.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{cli, cli_stdin, text, wait_for, Logged as Dev, FLEETQ, INSECURE};
use serde_json::Value;

/// A base port with the two after it free too, outside `avoid`, below
/// Linux's ephemeral range so that client connections cannot take them.
fn three_free_ports(avoid: &[u16]) -> u16 {
    common::consecutive_free_ports(20_000, 12_000, 3, avoid)
}

/// One HTTP/1.1 request: (status code, body).
fn http(addr: &str, method: &str, path: &str) -> Option<(u16, String)> {
    common::http(addr, method, path, Duration::from_secs(10)).map(|r| (r.status, r.body))
}

/// GET that must answer `want`, with a JSON body.
fn get_json(addr: &str, path: &str, want: u16) -> Value {
    let (status, body) =
        http(addr, "GET", path).unwrap_or_else(|| panic!("{addr}{path}: no answer"));
    assert_eq!(status, want, "{addr}{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{addr}{path}: not JSON ({e}): {body}"))
}

/// ClusterQueue vis with 4 GPUs (the one 4-GPU cluster), LocalQueues
/// default/alpha and research/beta, priority classes high and low.
const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: vis
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: alpha
spec:
  clusterQueue: vis
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: research
  name: beta
spec:
  clusterQueue: vis
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: low
value: 10
"#;

fn submit(addr: &str, namespace: &str, queue: &str, name: &str, class: Option<&str>, wait: bool) {
    let mut args = vec![
        "submit",
        "-n",
        namespace,
        "--queue",
        queue,
        "--name",
        name,
        "--request",
        "nvidia.com/gpu=4",
        "--duration",
        "10m",
    ];
    if let Some(c) = class {
        args.extend(["--priority-class", c]);
    }
    if wait {
        args.push("--wait");
    }
    let out = cli(addr, &args);
    assert!(out.status.success(), "submit {name}: {}", text(&out));
}

/// `fleetq get pending ARGS -o json`.
fn pending(addr: &str, args: &[&str]) -> Value {
    let mut all = vec!["get", "pending"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let out = cli(addr, &all);
    assert!(out.status.success(), "{all:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{all:?}: not JSON ({e}): {}", text(&out)))
}

fn column<'a>(items: &'a Value, key: &str) -> Vec<&'a Value> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {items}"))
        .iter()
        .map(|i| i.pointer(key).unwrap_or(&Value::Null))
        .collect()
}

fn strs<'a>(items: &'a Value, key: &str) -> Vec<&'a str> {
    column(items, key)
        .into_iter()
        .map(|v| v.as_str().unwrap_or("?"))
        .collect()
}

fn nums(items: &Value, key: &str) -> Vec<i64> {
    column(items, key)
        .into_iter()
        .map(|v| v.as_i64().unwrap_or(-99))
        .collect()
}

/// Admission order: priority first, then submission order.
const ORDER: [&str; 6] = ["b-high", "a-high", "a-low", "b-low", "a-none", "b-none"];

#[test]
fn pending_workloads_in_admission_order_over_grpc_cli_and_http() {
    let port = three_free_ports(&[]);
    let http_port = three_free_ports(&[port]);
    let addr = format!("127.0.0.1:{port}");
    let https: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}", http_port + i))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("dev.log");
    let out = std::fs::File::create(&log).expect("log");
    // Plaintext: the test also talks gRPC to dev with its own client
    // (and `cli` passes --insecure too).
    let child = Command::new(FLEETQ)
        .args(["dev", INSECURE, "--port", &port.to_string()])
        .args(["--http-listen", &https[0]])
        .args(["--no-sample", "--cluster", "vis-east:h100-80gb=4"])
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("fleetq dev starts");
    let dev = Dev::new(child, log, dir);
    wait_for(Duration::from_secs(30), || {
        dev.log().contains("fleetq dev is running").then_some(())
    })
    .unwrap_or_else(|| panic!("fleetq dev did not start: {}", dev.log()));
    let out = cli_stdin(&addr, &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    // The cluster has registered once something can be admitted on it.
    wait_for(Duration::from_secs(30), || {
        let out = cli(&addr, &["get", "clusters", "-o", "json"]);
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        (list.as_array()?.len() == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("the cluster did not register: {}", dev.log()));

    // Fill the queue, then queue six workloads that cannot fit.
    submit(&addr, "default", "alpha", "filler", None, true);
    for (ns, queue, name, class) in [
        ("default", "alpha", "a-low", Some("low")),
        ("research", "beta", "b-high", Some("high")),
        ("default", "alpha", "a-none", None),
        ("research", "beta", "b-low", Some("low")),
        ("default", "alpha", "a-high", Some("high")),
        ("research", "beta", "b-none", None),
    ] {
        submit(&addr, ns, queue, name, class, false);
    }
    // Wait until the admission loop has looked at all six.
    let all = wait_for(Duration::from_secs(30), || {
        let all = pending(&addr, &["--cluster-queue", "vis"]);
        strs(&all["items"], "/reasonKind")
            .iter()
            .all(|k| *k == "WaitingForQuota")
            .then_some(all)
    })
    .unwrap_or_else(|| {
        panic!(
            "the six did not all wait for quota: {}",
            pending(&addr, &["--cluster-queue", "vis"])
        )
    });

    // --- CLI (gRPC) -----------------------------------------------------
    assert_eq!(all["clusterQueue"], "vis", "{all}");
    assert_eq!(all["total"], 6, "{all}");
    let items = &all["items"];
    assert_eq!(strs(items, "/name"), ORDER, "{all}");
    assert_eq!(nums(items, "/position"), [1, 2, 3, 4, 5, 6], "{all}");
    assert_eq!(nums(items, "/localQueuePosition"), [1, 1, 2, 2, 3, 3]);
    assert_eq!(nums(items, "/priority"), [1000, 1000, 10, 10, 0, 0]);
    assert_eq!(
        strs(items, "/localQueue"),
        ["beta", "alpha", "alpha", "beta", "alpha", "beta"]
    );
    assert_eq!(
        strs(items, "/namespace"),
        ["research", "default", "default", "research", "default", "research"]
    );
    assert!(
        strs(items, "/reason").iter().all(|r| !r.is_empty()),
        "{all}"
    );

    let page = pending(
        &addr,
        &["--cluster-queue", "vis", "--limit", "2", "--offset", "3"],
    );
    assert_eq!(page["total"], 6, "{page}");
    assert_eq!(strs(&page["items"], "/name"), ["b-low", "a-none"], "{page}");
    assert_eq!(nums(&page["items"], "/position"), [4, 5]);

    let beta = pending(&addr, &["-n", "research", "--local-queue", "beta"]);
    assert_eq!(beta["total"], 3, "{beta}");
    assert_eq!(beta["namespace"], "research");
    assert_eq!(beta["localQueue"], "beta");
    assert_eq!(strs(&beta["items"], "/name"), ["b-high", "b-low", "b-none"]);
    assert_eq!(nums(&beta["items"], "/position"), [1, 4, 6], "{beta}");
    assert_eq!(nums(&beta["items"], "/localQueuePosition"), [1, 2, 3]);
    let beta = pending(
        &addr,
        &[
            "-n",
            "research",
            "--local-queue",
            "beta",
            "--offset",
            "1",
            "--limit",
            "1",
        ],
    );
    assert_eq!(beta["total"], 3, "{beta}");
    assert_eq!(strs(&beta["items"], "/name"), ["b-low"]);
    assert_eq!(nums(&beta["items"], "/position"), [4]);
    assert_eq!(nums(&beta["items"], "/localQueuePosition"), [2]);

    // The table.
    let out = cli(&addr, &["get", "pending", "--cluster-queue", "vis"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "POSITION",
            "NAMESPACE",
            "NAME",
            "LOCALQUEUE",
            "PRIORITY",
            "AGE",
            "REASON"
        ],
        "{table}"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 6, "{table}");
    assert_eq!(
        rows[0][..5],
        ["1", "research", "b-high", "beta", "1000"],
        "{table}"
    );
    assert_eq!(
        rows[5][..5],
        ["6", "research", "b-none", "beta", "0"],
        "{table}"
    );
    let out = cli(
        &addr,
        &["get", "pending", "--cluster-queue", "vis", "--limit", "2"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("Showing 1-2 of 6"), "{table}");

    // CLI errors: unknown queues, both selectors, neither.
    let out = cli(&addr, &["get", "pending", "--cluster-queue", "nope"]);
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not found") && stderr.contains("\"nope\""),
        "{stderr}"
    );
    let out = cli(
        &addr,
        &["get", "pending", "-n", "default", "--local-queue", "beta"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not found") && stderr.contains("local_queue"),
        "{stderr}"
    );
    let out = cli(
        &addr,
        &[
            "get",
            "pending",
            "--cluster-queue",
            "vis",
            "--local-queue",
            "alpha",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--local-queue"),
        "{}",
        text(&out)
    );
    let out = cli(&addr, &["get", "pending"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--cluster-queue"),
        "{}",
        text(&out)
    );

    // --- gRPC: the request's own checks ------------------------------------
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let channel = fleetq_server::transport::endpoint(&addr, &Default::default())
            .expect("endpoint")
            .connect()
            .await
            .expect("connects");
        let mut c = fleetq_proto::v1::fleet_q_client::FleetQClient::new(channel);
        let req = |cq: &str, ns: &str, lq: &str| fleetq_proto::v1::PendingWorkloadsRequest {
            cluster_queue: cq.into(),
            namespace: ns.into(),
            local_queue: lq.into(),
            ..Default::default()
        };
        for (r, field) in [
            (req("vis", "default", "alpha"), "cluster_queue"),
            (req("", "", ""), "cluster_queue"),
            (req("", "", "alpha"), "namespace"),
            (req("", "default", ""), "local_queue"),
        ] {
            let e = c.pending_workloads(r.clone()).await.expect_err("refused");
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{r:?}: {e:?}");
            assert!(
                e.message().starts_with(&format!("{field}: ")),
                "{r:?}: {e:?}"
            );
        }
        let list = c
            .pending_workloads(fleetq_proto::v1::PendingWorkloadsRequest {
                offset: 4,
                ..req("", "default", "alpha")
            })
            .await
            .expect("answers")
            .into_inner();
        assert_eq!((list.total, list.workloads.len()), (3, 0));
        let e = c
            .pending_workloads(req("nope", "", ""))
            .await
            .expect_err("unknown");
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
        // ListWorkloads filtered by ClusterQueue: the total counts every
        // match, the limit bounds what is rendered.
        let listed =
            |cluster_queue: &str, state: &str, limit: u32| fleetq_proto::v1::ListWorkloadsRequest {
                all_namespaces: true,
                cluster_queue: cluster_queue.into(),
                state: state.into(),
                limit,
                ..Default::default()
            };
        for (cq, state, limit, total, shown) in [
            ("vis", "Pending", 2, 6, 2),
            ("vis", "", 0, 7, 7),
            ("nope", "", 0, 0, 0),
        ] {
            let list = c
                .list_workloads(listed(cq, state, limit))
                .await
                .expect("answers")
                .into_inner();
            assert_eq!(
                (list.total, list.workloads.len()),
                (total, shown),
                "{cq} {state:?}: {list:?}"
            );
            assert!(
                list.workloads.iter().all(|w| w.cluster_queue == cq),
                "{list:?}"
            );
        }
    });

    // --- HTTP, on every node ---------------------------------------------
    let cq_url = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/vis/pendingworkloads";
    let lq_url =
        "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/alpha/pendingworkloads";
    for h in &https {
        let body = get_json(h, cq_url, 200);
        assert_eq!(body["kind"], "PendingWorkloadsSummary", "{h}: {body}");
        assert_eq!(body["apiVersion"], "visibility.kueue.x-k8s.io/v1beta1");
        assert_eq!(body["total"], 6, "{h}: {body}");
        let items = &body["items"];
        assert_eq!(strs(items, "/metadata/name"), ORDER, "{h}: {body}");
        assert_eq!(
            strs(items, "/metadata/namespace"),
            ["research", "default", "default", "research", "default", "research"]
        );
        assert_eq!(nums(items, "/positionInClusterQueue"), [0, 1, 2, 3, 4, 5]);
        assert_eq!(nums(items, "/positionInLocalQueue"), [0, 0, 1, 1, 2, 2]);
        assert_eq!(nums(items, "/priority"), [1000, 1000, 10, 10, 0, 0]);
        assert_eq!(
            strs(items, "/localQueueName"),
            ["beta", "alpha", "alpha", "beta", "alpha", "beta"]
        );
        assert!(
            strs(items, "/reasonKind")
                .iter()
                .all(|k| *k == "WaitingForQuota"),
            "{h}: {body}"
        );
        assert!(
            strs(items, "/metadata/creationTimestamp")
                .iter()
                .all(|t| t.len() == 20 && t.ends_with('Z')),
            "{h}: {body}"
        );
    }
    let h = &https[1];
    let body = get_json(h, &format!("{cq_url}?limit=2&offset=1"), 200);
    assert_eq!(body["total"], 6, "{body}");
    assert_eq!(strs(&body["items"], "/metadata/name"), ["a-high", "a-low"]);
    assert_eq!(nums(&body["items"], "/positionInClusterQueue"), [1, 2]);

    let body = get_json(h, lq_url, 200);
    assert_eq!(body["total"], 3, "{body}");
    assert_eq!(
        strs(&body["items"], "/metadata/name"),
        ["a-high", "a-low", "a-none"]
    );
    assert_eq!(nums(&body["items"], "/positionInClusterQueue"), [1, 2, 4]);
    assert_eq!(nums(&body["items"], "/positionInLocalQueue"), [0, 1, 2]);
    let body = get_json(h, &format!("{lq_url}?offset=2"), 200);
    assert_eq!(strs(&body["items"], "/metadata/name"), ["a-none"], "{body}");
    assert_eq!(nums(&body["items"], "/positionInLocalQueue"), [2]);
    assert_eq!(body["total"], 3);
    let body = get_json(h, &format!("{lq_url}?offset=3"), 200);
    assert_eq!(body["items"], serde_json::json!([]), "{body}");

    // HTTP errors: Kubernetes Status objects.
    for (path, code, needle) in [
        (
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/nope/pendingworkloads",
            404,
            "nope",
        ),
        (
            "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/research/localqueues/alpha/pendingworkloads",
            404,
            "research",
        ),
        (
            "/apis/visibility.kueue.x-k8s.io/v9/clusterqueues/vis/pendingworkloads",
            404,
            "v9",
        ),
        (&format!("{cq_url}?limit=abc"), 400, "limit"),
        (&format!("{cq_url}?limit=-5"), 400, "limit"),
        (&format!("{lq_url}?offset=-1"), 400, "offset"),
    ] {
        let body = get_json(h, path, code);
        assert_eq!(body["kind"], "Status", "{path}: {body}");
        assert_eq!(body["code"], code, "{path}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{path}: {body}");
    }
    let (status, body) = http(h, "POST", cq_url).expect("answers");
    assert_eq!(status, 405, "{body}");
    // The node's other routes still answer.
    let (status, body) = http(h, "GET", "/healthz").expect("answers");
    assert_eq!(status, 200, "{body}");
}
