//! End-to-end: the limits against abuse. An oversized request, a write
//! over a client's rate and a submission to a full LocalQueue are each
//! refused with an error that names the limit, change nothing (the state
//! hash of `fleetq status -o json`), and are counted in
//! `fleetq_requests_refused_total{reason}`; bad limit settings are
//! refused naming the flag, by `fleetq server` and `fleetq dev` alike.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    cli, cli_stdin, text, wait_for, write_file, Group, Logged as Dev, CONFIG, FLEETQ, INSECURE,
};
use fleetq_proto::v1 as pb;
use serde_json::Value;

/// Six consecutive free ports (three gRPC, three HTTP for `fleetq dev`),
/// from 10000-11999: below the ranges the other tests draw from
/// (e2e_dashboard 12000-19999, e2e_metrics and e2e_visibility
/// 20000-31999, e2e_cli_comfort 27460-27699) and below Linux's ephemeral
/// range, where `free_port()` and client connections land.
fn six_free_ports() -> u16 {
    common::consecutive_free_ports(10_000, 1_990, 6, &[])
}

/// GET over plain HTTP/1.1: the body of a 200.
fn http_get(addr: &str, path: &str) -> Option<String> {
    common::http(addr, "GET", path, Duration::from_secs(5))
        .filter(|r| r.status == 200)
        .map(|r| r.body)
}

/// `fleetq_requests_refused_total{reason}` as node `http` reports it.
fn refused(http: &str, reason: &str) -> f64 {
    let body = http_get(http, "/metrics").expect("/metrics answers");
    let prefix = format!("fleetq_requests_refused_total{{reason=\"{reason}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} in /metrics:\n{body}"))
}

fn status(addr: &str) -> Option<Value> {
    let out = cli(addr, &["status", "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn hash(addr: &str) -> String {
    status(addr).expect("status")["stateHash"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The state hash once it has held still for a second (the admission
/// loop writes pending reasons after submissions).
fn settled_hash(addr: &str) -> String {
    let mut last = hash(addr);
    let mut since = Instant::now();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        let now = hash(addr);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(1) {
            return last;
        }
    }
    panic!("the state hash of {addr} never settled");
}

/// Names of the workloads in namespace `default`.
fn workload_names(addr: &str) -> Vec<String> {
    let out = cli(addr, &["get", "workloads", "-o", "fleetq-json"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|w| w["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn api(addr: &str) -> pb::fleet_q_client::FleetQClient<tonic::transport::Channel> {
    pb::fleet_q_client::FleetQClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
        .max_encoding_message_size(64 << 20)
}

/// A workload of `gpus` GPUs on LocalQueue team-a, as JSON.
fn workload_json(name: &str, gpus: u32) -> String {
    format!(
        r#"{{"namespace":"default","name":"{name}","spec":{{"queueName":"team-a","podSets":[{{"name":"main","count":1,"requests":{{"nvidia.com/gpu":"{gpus}"}}}}]}}}}"#
    )
}

/// Submits a request of `bytes` bytes; returns the refusal.
async fn oversized_submit(addr: &str, bytes: usize) -> tonic::Status {
    let mut c = api(addr).await;
    c.submit(pb::SubmitRequest {
        request_id: String::new(),
        workload_json: "x".repeat(bytes),
        workloads_json: Vec::new(),
    })
    .await
    .expect_err("an oversized request is refused")
}

#[test]
fn a_server_refuses_oversized_requests_and_full_local_queues_changing_nothing() {
    let http = format!("127.0.0.1:{}", common::free_port());
    let group = Group::start(
        1,
        &[
            "--simulate-cluster",
            "sim-1:h100-80gb=16",
            "--max-pending-per-local-queue",
            "3",
            "--http-listen",
            &http,
        ],
    );
    group
        .wait_leader(Duration::from_secs(15))
        .expect("the node elects itself");
    let addr = group.addr(1).to_string();
    let out = cli_stdin(&addr, &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    for reason in [
        "request_too_large",
        "rate_limit",
        "pending_limit",
        "agent_sessions",
    ] {
        assert_eq!(refused(&http, reason), 0.0, "{reason}");
    }

    // A request over the default 16 MiB is refused before it is read,
    // naming the setting and the limit.
    let before = settled_hash(&addr);
    let err = runtime().block_on(oversized_submit(&addr, 17 << 20));
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
    assert!(
        err.message().contains("max_request_bytes") && err.message().contains("16777216"),
        "{}",
        err.message()
    );
    assert_eq!(
        settled_hash(&addr),
        before,
        "an oversized request changed the ledger"
    );
    assert_eq!(refused(&http, "request_too_large"), 1.0);
    let log = group.log(1);
    assert!(
        log.contains("request_too_large") && log.contains("refused"),
        "the refusal is logged:\n{log}"
    );

    // Three 9-GPU workloads wait (the queue has 8): the LocalQueue is full.
    let submit = |name: &str| {
        cli(
            &addr,
            &[
                "submit",
                "--queue",
                "team-a",
                "--name",
                name,
                "--request",
                "nvidia.com/gpu=9",
            ],
        )
    };
    for name in ["p1", "p2", "p3"] {
        let out = submit(name);
        assert!(out.status.success(), "{}", text(&out));
    }
    let before = settled_hash(&addr);
    let out = submit("p4");
    assert!(
        !out.status.success(),
        "a fourth pending was accepted: {}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("LocalQueue \"default/team-a\"")
            && stderr.contains("limit is 3")
            && stderr.contains("max_pending_per_local_queue"),
        "{}",
        text(&out)
    );
    assert_eq!(
        settled_hash(&addr),
        before,
        "a refused submission changed the ledger"
    );
    assert_eq!(workload_names(&addr), ["p1", "p2", "p3"]);
    assert_eq!(refused(&http, "pending_limit"), 1.0);

    // Room again once one leaves the queue.
    let out = cli(&addr, &["cancel", "p1"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = submit("p4");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(refused(&http, "pending_limit"), 1.0);
    assert_eq!(
        refused(&http, "rate_limit"),
        0.0,
        "no rate limit by default"
    );
}

#[test]
fn dev_limits_writes_per_client_request_size_and_agent_sessions() {
    let port = six_free_ports();
    let addr = format!("127.0.0.1:{port}");
    let https: Vec<String> = (3..6).map(|i| format!("127.0.0.1:{}", port + i)).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = std::fs::File::create(dir.path().join("dev.log")).expect("log");
    // Plaintext: the test also talks gRPC to dev with its own client
    // (and `cli` passes --insecure too).
    let child = Command::new(FLEETQ)
        .args(["dev", INSECURE, "--port", &port.to_string()])
        .args(["--http-listen", &https[0]])
        .args(["--client-write-rate", "2"])
        .args(["--max-request-bytes", "1Mi"])
        .args(["--max-pending-per-local-queue", "50"])
        // Two clusters, room for one: the other agent's session is refused.
        .args(["--max-agent-sessions", "1"])
        .env("RUST_LOG", "warn,openraft=off")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq dev starts");
    let dev = Dev::new(child, dir.path().join("dev.log"), dir);
    wait_for(Duration::from_secs(30), || {
        let out = cli(&addr, &["get", "lq"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains("team-a"))
            .then_some(())
    })
    .unwrap_or_else(|| panic!("fleetq dev did not answer: {}", dev.log()));
    // The sample's Apply took a token; let the bucket fill again.
    std::thread::sleep(Duration::from_secs(2));

    // Ten quick writes from one client at 2/s with a burst of 2: the first
    // two pass, most of the rest are refused, naming the rate and source.
    let start = Instant::now();
    let (accepted, refusals) = runtime().block_on(async {
        let mut c = api(&addr).await;
        let mut accepted = Vec::new();
        let mut refusals = Vec::new();
        for i in 0..10 {
            let name = format!("r{i}");
            match c
                .submit(pb::SubmitRequest {
                    request_id: String::new(),
                    workload_json: workload_json(&name, 1000),
                    workloads_json: Vec::new(),
                })
                .await
            {
                Ok(r) => {
                    let r = r.into_inner();
                    assert!(r.results.iter().all(|r| r.errors.is_empty()), "{r:?}");
                    accepted.push(name);
                }
                Err(s) => refusals.push(s),
            }
        }
        (accepted, refusals)
    });
    let elapsed = start.elapsed().as_secs_f64();
    assert!(accepted.len() >= 2, "the burst passes: {accepted:?}");
    assert!(
        accepted.len() as f64 <= 2.0 + (2.0 * elapsed).ceil(),
        "{} accepted in {elapsed:.2}s at 2/s",
        accepted.len()
    );
    assert!(!refusals.is_empty(), "nothing was refused in {elapsed:.2}s");
    for s in &refusals {
        assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
        assert!(
            s.message()
                .starts_with("rate limit: 2 writes/s per client (source 127.0.0.1)"),
            "{}",
            s.message()
        );
    }
    // Only the accepted ones are in the ledger (reads are not limited).
    let mut expected = accepted.clone();
    expected.sort();
    assert_eq!(workload_names(&addr), expected);
    assert_eq!(refused(&https[0], "rate_limit"), refusals.len() as f64);
    // The CLI says what happened: cancels in a quick row run out of tokens.
    let refused_cancel = (0..20).find_map(|_| {
        let out = cli(&addr, &["cancel", "r0"]);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (!out.status.success() && stderr.contains("limit exceeded")).then_some(stderr)
    });
    let stderr = refused_cancel.expect("twenty quick cancels were all let through");
    assert!(
        stderr.contains("limit exceeded: rate limit: 2 writes/s per client (source 127.0.0.1)"),
        "{stderr}"
    );

    // An Apply of five Workloads is five writes, over the burst of two:
    // refused whole, none of them in the ledger.
    std::thread::sleep(Duration::from_secs(2));
    let five: String = (0..5)
        .map(|i| {
            format!(
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{name: applied-{i}, namespace: default}}\nspec:\n  queueName: team-a\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n        - name: main\n          resources: {{requests: {{nvidia.com/gpu: \"1\"}}}}\n---\n"
            )
        })
        .collect();
    let out = cli_stdin(&addr, &["apply", "-f", "-"], &five);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("a batch of 5 workloads is more than a client's burst of 2"),
        "{}",
        text(&out)
    );
    assert!(
        !workload_names(&addr)
            .iter()
            .any(|n| n.starts_with("applied-")),
        "a refused Apply left workloads"
    );

    // --max-request-bytes 1Mi: 2 MiB is refused, naming it; no token spent.
    let before = settled_hash(&addr);
    let err = runtime().block_on(oversized_submit(&addr, 2 << 20));
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
    assert!(
        err.message().contains("max_request_bytes") && err.message().contains("1048576"),
        "{}",
        err.message()
    );
    assert_eq!(settled_hash(&addr), before);
    assert_eq!(refused(&https[0], "request_too_large"), 1.0);

    // One of the two agents is held off by --max-agent-sessions 1, on
    // whichever node leads.
    let held_off = wait_for(Duration::from_secs(20), || {
        let n: f64 = https.iter().map(|h| refused(h, "agent_sessions")).sum();
        (n >= 1.0).then_some(n)
    });
    assert!(
        held_off.is_some(),
        "no agent session was refused: {}",
        dev.log()
    );
    assert!(
        dev.log().contains("max_agent_sessions"),
        "the refusal is logged: {}",
        dev.log()
    );
}

fn fails_naming(args: &[&str], needle: &str) {
    // A dev that got past its checks would make certificates: never in
    // ~/.fleetq/tls.
    let tls = tempfile::tempdir().expect("temp dir");
    let out = Command::new(FLEETQ)
        .args(args)
        .env("FLEETQ_TLS_DIR", tls.path().join("tls"))
        .stdin(Stdio::null())
        .output()
        .expect("fleetq runs");
    assert!(!out.status.success(), "{args:?} succeeded: {}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(needle),
        "{args:?}: the error names {needle}: {stderr}"
    );
}

#[test]
fn bad_limit_settings_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listen = format!("127.0.0.1:{}", common::free_port());
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    let server = [
        "server",
        "--id",
        "1",
        "--listen",
        &listen,
        "--data-dir",
        data,
    ];
    let cases: [(&[&str], &str); 6] = [
        (&["--max-request-bytes", "12x"], "--max-request-bytes"),
        (&["--max-request-bytes", "100"], "--max-request-bytes"),
        (&["--client-write-rate", "-1"], "--client-write-rate"),
        (&["--client-write-burst", "5"], "--client-write-burst"),
        (
            &["--max-pending-per-local-queue", "lots"],
            "--max-pending-per-local-queue",
        ),
        (&["--max-agent-sessions", "0"], "--max-agent-sessions"),
    ];
    for (flags, needle) in cases {
        fails_naming(&[&server[..], flags].concat(), needle);
        fails_naming(&[&["dev"][..], flags].concat(), needle);
    }
    // The same keys in the server's TOML file.
    let config = write_file(
        dir.path(),
        "bad.toml",
        &format!(
            "id = 1\nlisten = \"{listen}\"\ndata_dir = \"{data}\"\nmax_request_bytes = \"16MB\"\n"
        ),
    );
    let config = config.to_str().expect("utf-8 path");
    fails_naming(&["server", "--config", config], "max_request_bytes");
    let config = write_file(
        dir.path(),
        "bad2.toml",
        &format!("id = 1\nlisten = \"{listen}\"\ndata_dir = \"{data}\"\nclient_write_rate = -3\n"),
    );
    let config = config.to_str().expect("utf-8 path");
    fails_naming(&["server", "--config", config], "client-write-rate");
    assert!(
        !dir.path().join("data").exists(),
        "a refused configuration created the data directory"
    );
}

/// Attacks of issue 25 that once stalled the group, each refused before
/// anything is proposed, with one short error naming the field, while the
/// node keeps answering and its state does not change.
#[test]
fn hostile_requests_are_refused_before_the_log() {
    // A 2 s lease: a node stalled by a request for longer would fence
    // the agent's cluster and stop its workload.
    let group = Group::start(1, &["--lease-ttl", "2s"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("the node elects itself");
    let addr = group.addr(1).to_string();
    let out = cli_stdin(&addr, &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let agent_log = std::fs::File::create(group.dir.path().join("agent.log")).expect("log");
    let mut agent = Command::new(FLEETQ)
        .args([INSECURE, "--server", &addr, "agent", "--cluster", "east"])
        .args(["--inventory", "static", "--static-inventory", "h100-80gb=8"])
        .args(["--executor", "simulated"])
        .stdin(Stdio::null())
        .stdout(agent_log.try_clone().expect("log"))
        .stderr(agent_log)
        .spawn()
        .expect("fleetq agent starts");
    let out = cli(
        &addr,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "bystander",
            "--request",
            "nvidia.com/gpu=1",
            "--duration",
            "10m",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let running = |addr: &str| {
        let out = cli(addr, &["describe", "workload", "bystander"]);
        let described = String::from_utf8_lossy(&out.stdout).to_string();
        described
            .lines()
            .any(|l| l.starts_with("State:") && l.contains("Running"))
            .then_some(described)
    };
    wait_for(Duration::from_secs(20), || running(&addr)).expect("the bystander runs on east");
    let before = settled_hash(&addr);
    let commands = |addr: &str| status(addr).expect("status")["counters"]["commands"].as_u64();
    let proposed = commands(&addr);

    // A 280 KB workload: a very long name and 5,000 requests.
    let requests: Vec<String> = (0..5000)
        .map(|i| format!("\"example.com/r{i}\":\"1\""))
        .collect();
    let huge = format!(
        r#"{{"namespace":"default","name":"{}","spec":{{"queueName":"team-a","podSets":[{{"name":"main","count":1,"requests":{{{}}}}}]}}}}"#,
        "x".repeat(200_000),
        requests.join(",")
    );
    assert!(huge.len() > 280_000);
    let err = runtime()
        .block_on(async {
            api(&addr)
                .await
                .submit(pb::SubmitRequest {
                    request_id: String::new(),
                    workload_json: huge,
                    workloads_json: Vec::new(),
                })
                .await
        })
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("metadata.name") && err.message().contains("at most 253"),
        "{}",
        &err.message()[..err.message().len().min(400)]
    );
    assert!(
        err.message().len() < 1000,
        "one short error, not one per request"
    );

    // An alias bomb, and flow collections 100,000 deep: refused by the
    // guard before any parser sees them.
    let bomb = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: bomb\n  labels: &x [{}]\nspec:\n  nodeLabels: [{}]\n",
        vec!["a"; 10_000].join(","),
        vec!["*x"; 2_000].join(",")
    );
    let out = cli_stdin(&addr, &["apply", "-f", "-"], &bomb);
    assert!(!out.status.success());
    assert!(text(&out).contains("anchor"), "{}", text(&out));
    let deep = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: deep}}\nspec: {{nodeLabels: {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let out = cli_stdin(&addr, &["apply", "-f", "-"], &deep);
    assert!(!out.status.success());
    assert!(text(&out).contains("32 deep"), "{}", text(&out));

    // Nothing was proposed; the node still answers; nothing changed.
    assert_eq!(
        commands(&addr),
        proposed,
        "a refused request reached the log"
    );
    assert_eq!(settled_hash(&addr), before);
    let out = cli(&addr, &["get", "cq"]);
    assert!(out.status.success(), "{}", text(&out));
    // No lease expired meanwhile: the bystander ran on, never evicted.
    let described = running(&addr).expect("the bystander still runs");
    assert!(
        !described.contains("Evicted") && !described.contains("ClusterLost"),
        "{described}"
    );
    let _ = agent.kill();
    let _ = agent.wait();
}
