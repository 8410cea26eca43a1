//! Prometheus `/metrics`, `/healthz` and `/readyz` of real nodes: a
//! scripted `fleetq dev` run whose Kueue-named series must agree with what
//! the ledger reports through the CLI (`describe cq`, `get workloads`,
//! `get clusters`), identically on every replica; `fleetq server` serving
//! HTTP from its TOML config; bad values of the new flags refused naming
//! the flag.

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cli_tls, text, wait_for, write_file, Logged as Dev, FLEETQ, INSECURE};
use serde_json::Value;

/// A base port with the two after it free too, outside `avoid`. Taken
/// below Linux's ephemeral range (32768-60999), so that the many client
/// connections of a test cannot be handed one of them meanwhile.
fn three_free_ports(avoid: &[u16]) -> u16 {
    common::consecutive_free_ports(20_000, 12_000, 3, avoid)
}

/// GET over plain HTTP/1.1: (status code, body).
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    common::http(addr, "GET", path, Duration::from_secs(5)).map(|r| (r.status, r.body))
}

/// One sample line: metric name and its labels.
type Series = (String, BTreeMap<String, String>);

/// Parses the Prometheus text format (no escaped quotes in our labels).
fn parse_metrics(body: &str) -> BTreeMap<Series, f64> {
    let mut out = BTreeMap::new();
    for line in body.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("malformed sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("malformed value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest.trim_end_matches('}');
                let labels = rest
                    .split("\",")
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        let (k, v) = l
                            .split_once("=\"")
                            .unwrap_or_else(|| panic!("malformed label in {line:?}"));
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.insert((name, labels), value);
    }
    out
}

fn get(m: &BTreeMap<Series, f64>, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    m.get(&(name.to_string(), labels)).copied()
}

/// Whole units of a CLI quantity (`12`, `500m`).
fn units(q: &str) -> f64 {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().map(|m| m / 1000.0),
        None => q.parse::<f64>(),
    }
    .unwrap_or_else(|_| panic!("unexpected quantity {q:?}"))
}

/// What `describe cq` says: (pending, admitted, flavor/resource ->
/// (nominal, usage)).
type Described = (f64, f64, BTreeMap<(String, String), (f64, f64)>);

/// `tls`: the certificate directory of `fleetq dev --tls-dir` (the CLI's
/// FLEETQ_TLS_DIR), here and in the helpers below.
fn describe_cq(addr: &str, tls: &Path, name: &str) -> Option<Described> {
    let out = cli_tls(addr, tls, &["describe", "cq", name]);
    if !out.status.success() {
        return None;
    }
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| units(v.trim()))
    };
    let pending = field("Pending:")?;
    let admitted = field("Admitted:")?;
    let mut quota = BTreeMap::new();
    let mut in_table = false;
    for line in stdout.lines() {
        if line.starts_with("FLAVOR") {
            in_table = true;
            continue;
        }
        if in_table {
            let cells: Vec<&str> = line.split_whitespace().collect();
            if cells.len() >= 4 {
                quota.insert(
                    (cells[0].to_string(), cells[1].to_string()),
                    (units(cells[2]), units(cells[3])),
                );
            }
        }
    }
    Some((pending, admitted, quota))
}

fn workloads(addr: &str, tls: &Path) -> Vec<Value> {
    let out = cli_tls(addr, tls, &["get", "workloads", "-A", "-o", "fleetq-json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).expect("a JSON array")
}

/// Reason kinds that count as "inadmissible" (metrics.rs `holds_back`).
const HOLDING_BACK: [&str; 8] = [
    "WaitingForQuota",
    "ExceedsMaxQuota",
    "NoClusterCapacity",
    "Misconfigured",
    "Suspended",
    "BackingOff",
    "BudgetExhausted",
    "BlockedByHead",
];

/// The ledger-derived series, which every replica must report alike.
fn replicated(m: &BTreeMap<Series, f64>) -> BTreeMap<Series, f64> {
    m.iter()
        .filter(|((name, _), _)| {
            let leader_only = name.starts_with("kueue_admission_attempt")
                || name.starts_with("fleetq_raft_")
                || name.starts_with("fleetq_cluster_lease_age")
                // Refusals are counted by the node that refused.
                || name.starts_with("fleetq_requests_refused");
            (name.starts_with("kueue_") || name.starts_with("fleetq_")) && !leader_only
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn submit(addr: &str, tls: &Path, queue: &str, name: &str, gpus: u32, duration: &str) {
    let request = format!("nvidia.com/gpu={gpus}");
    let out = cli_tls(
        addr,
        tls,
        &[
            "submit",
            "--queue",
            queue,
            "--name",
            name,
            "--request",
            &request,
            "--duration",
            duration,
        ],
    );
    assert!(out.status.success(), "submit {name}: {}", text(&out));
}

/// Compares the scraped series with the CLI's view of the ledger; returns
/// the mismatches (empty when everything agrees).
fn mismatches(addr: &str, tls: &Path, m: &BTreeMap<Series, f64>) -> Vec<String> {
    let mut bad = Vec::new();
    fn check(bad: &mut Vec<String>, what: String, metric: Option<f64>, cli: f64) {
        if metric != Some(cli) {
            bad.push(format!("{what}: metric {metric:?}, CLI {cli}"));
        }
    }
    let list = workloads(addr, tls);
    for cq in ["team-a", "team-b"] {
        let Some((pending, admitted, quota)) = describe_cq(addr, tls, cq) else {
            bad.push(format!("describe cq {cq} failed"));
            continue;
        };
        let l = [("cluster_queue", cq)];
        let active = get(m, "kueue_pending_workloads", &[l[0], ("status", "active")]);
        let held = get(
            m,
            "kueue_pending_workloads",
            &[l[0], ("status", "inadmissible")],
        );
        check(
            &mut bad,
            format!("{cq} pending (active + inadmissible)"),
            active.zip(held).map(|(a, b)| a + b),
            pending,
        );
        let mine = || {
            list.iter()
                .filter(move |w| w["clusterQueue"] == cq && w["state"] == "Pending")
        };
        let holding = mine()
            .filter(|w| HOLDING_BACK.contains(&w["reasonKind"].as_str().unwrap_or("")))
            .count();
        check(&mut bad, format!("{cq} inadmissible"), held, holding as f64);
        check(
            &mut bad,
            format!("{cq} pending per get workloads"),
            active.zip(held).map(|(a, b)| a + b),
            mine().count() as f64,
        );
        check(
            &mut bad,
            format!("{cq} admitted"),
            get(m, "kueue_admitted_active_workloads", &l),
            admitted,
        );
        for ((flavor, resource), (nominal, usage)) in &quota {
            let labels = [
                ("cohort", "research"),
                ("cluster_queue", cq),
                ("flavor", flavor.as_str()),
                ("resource", resource.as_str()),
            ];
            check(
                &mut bad,
                format!("{cq} {flavor}/{resource} nominal"),
                get(m, "kueue_cluster_queue_nominal_quota", &labels),
                *nominal,
            );
            check(
                &mut bad,
                format!("{cq} {flavor}/{resource} usage"),
                get(m, "kueue_cluster_queue_resource_usage", &labels),
                *usage,
            );
            check(
                &mut bad,
                format!("{cq} {flavor}/{resource} reservation"),
                get(m, "kueue_cluster_queue_resource_reservation", &labels),
                *usage,
            );
        }
    }
    let out = cli_tls(addr, tls, &["get", "clusters", "-o", "json"]);
    if !out.status.success() {
        bad.push(format!("get clusters: {}", text(&out)));
        return bad;
    }
    let clusters: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON clusters");
    for c in &clusters {
        let name = c["name"].as_str().unwrap_or_default();
        for f in c["capacity"].as_array().into_iter().flatten() {
            let (flavor, resource) = (
                f["flavor"].as_str().unwrap_or_default(),
                f["resource"].as_str().unwrap_or_default(),
            );
            let labels = [
                ("cluster", name),
                ("flavor", flavor),
                ("resource", resource),
            ];
            check(
                &mut bad,
                format!("{name} {flavor}/{resource} capacity"),
                get(m, "fleetq_cluster_capacity", &labels),
                units(f["capacity"].as_str().unwrap_or("?")),
            );
            check(
                &mut bad,
                format!("{name} {flavor}/{resource} allocated"),
                get(m, "fleetq_cluster_allocated", &labels),
                units(f["assigned"].as_str().unwrap_or("?")),
            );
        }
    }
    bad
}

fn state_of<'a>(list: &'a [Value], name: &str) -> &'a str {
    list.iter()
        .find(|w| w["name"] == name)
        .and_then(|w| w["state"].as_str())
        .unwrap_or("")
}

#[test]
fn dev_metrics_agree_with_the_ledger_on_every_replica() {
    let port = three_free_ports(&[]);
    let http_port = three_free_ports(&[port]);
    let addr = format!("127.0.0.1:{port}");
    let https: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}", http_port + i))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("dev.log");
    let out = std::fs::File::create(&log).expect("log");
    // Mutual TLS with certificates dev makes in the test's directory.
    let tls = dir.path().join("tls");
    let child = Command::new(FLEETQ)
        .args(["dev", "--port", &port.to_string()])
        .args(["--http-listen", &https[0]])
        .args(["--reserved-not-running-after", "30s"])
        .arg("--tls-dir")
        .arg(&tls)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("fleetq dev starts");
    let mut dev = Dev::new(child, log, dir);

    wait_for(Duration::from_secs(30), || {
        let out = cli_tls(&addr, &tls, &["get", "cq"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains("team-b"))
            .then_some(())
    })
    .unwrap_or_else(|| panic!("fleetq dev did not answer: {}", dev.log()));
    let log = wait_for(Duration::from_secs(10), || {
        let log = dev.log();
        log.contains("fleetq dev is running").then_some(log)
    })
    .unwrap_or_else(|| panic!("fleetq dev did not announce itself: {}", dev.log()));
    for h in &https {
        assert!(
            log.contains(&format!("http://{h}/metrics")),
            "the startup lines name each node's metrics address {h}:\n{log}"
        );
    }

    // Health and readiness on every node.
    for h in &https {
        let (status, body) = http_get(h, "/healthz").expect("healthz answers");
        assert_eq!(status, 200, "{h} /healthz: {body}");
        wait_for(Duration::from_secs(15), || {
            http_get(h, "/readyz").filter(|(s, _)| *s == 200)
        })
        .unwrap_or_else(|| panic!("{h} /readyz never 200: {:?}", http_get(h, "/readyz")));
        let (status, _) = http_get(h, "/no-such-page").expect("answers");
        assert_eq!(status, 404);
    }

    // A short workload that finishes, then work that fills the fleet:
    // team-a borrows 4 GPUs from team-b, a4 waits for quota.
    submit(&addr, &tls, "team-a", "quick", 1, "1s");
    wait_for(Duration::from_secs(30), || {
        (state_of(&workloads(&addr, &tls), "quick") == "Succeeded").then_some(())
    })
    .unwrap_or_else(|| panic!("quick did not finish: {:?}", workloads(&addr, &tls)));
    for name in ["a1", "a2", "a3"] {
        submit(&addr, &tls, "team-a", name, 4, "10m");
    }
    submit(&addr, &tls, "team-b", "b1", 2, "10m");
    submit(&addr, &tls, "team-a", "a4", 8, "10m");
    wait_for(Duration::from_secs(30), || {
        let list = workloads(&addr, &tls);
        let settled = ["a1", "a2", "a3", "b1"]
            .iter()
            .all(|n| state_of(&list, n) == "Running")
            && list
                .iter()
                .any(|w| w["name"] == "a4" && w["reasonKind"] == "WaitingForQuota");
        settled.then_some(())
    })
    .unwrap_or_else(|| panic!("the fleet did not settle: {:?}", workloads(&addr, &tls)));

    // Scrapes agree with the CLI (retrying while replicas catch up).
    let mut last = Vec::new();
    let scrapes = wait_for(Duration::from_secs(20), || {
        let scrapes: Vec<BTreeMap<Series, f64>> = https
            .iter()
            .map(|h| {
                let (status, body) = http_get(h, "/metrics").expect("metrics answers");
                assert_eq!(status, 200, "{h}: {body}");
                parse_metrics(&body)
            })
            .collect();
        last = mismatches(&addr, &tls, &scrapes[0]);
        let same = scrapes
            .iter()
            .all(|s| replicated(s) == replicated(&scrapes[0]));
        if !same {
            last.push("replicas report different ledger series".into());
        }
        last.is_empty().then_some(scrapes)
    })
    .unwrap_or_else(|| panic!("metrics never agreed with the ledger: {last:#?}"));

    // The expected numbers, not just agreement.
    let m = &scrapes[0];
    let cq = |name: &str, q: &str| {
        get(
            m,
            name,
            &[
                ("cohort", "research"),
                ("cluster_queue", q),
                ("flavor", "h100-80gb"),
                ("resource", "nvidia.com/gpu"),
            ],
        )
    };
    assert_eq!(
        get(
            m,
            "kueue_pending_workloads",
            &[("cluster_queue", "team-a"), ("status", "inadmissible")]
        ),
        Some(1.0)
    );
    assert_eq!(
        get(
            m,
            "kueue_admitted_active_workloads",
            &[("cluster_queue", "team-a")]
        ),
        Some(3.0)
    );
    assert_eq!(
        get(
            m,
            "kueue_admitted_active_workloads",
            &[("cluster_queue", "team-b")]
        ),
        Some(1.0)
    );
    assert_eq!(
        cq("kueue_cluster_queue_resource_usage", "team-a"),
        Some(12.0)
    );
    assert_eq!(cq("kueue_cluster_queue_nominal_quota", "team-a"), Some(8.0));
    assert_eq!(
        cq("kueue_cluster_queue_resource_usage", "team-b"),
        Some(2.0)
    );
    let share = get(
        m,
        "kueue_cluster_queue_weighted_share",
        &[("cluster_queue", "team-a")],
    );
    assert!(share.is_some_and(|s| s > 0.0), "team-a borrows: {share:?}");
    // quick, a1, a2 and a3 were admitted once each; b1 once.
    assert_eq!(
        get(
            m,
            "kueue_admission_wait_time_seconds_count",
            &[("cluster_queue", "team-a")]
        ),
        Some(4.0)
    );
    assert_eq!(
        get(
            m,
            "kueue_admission_wait_time_seconds_count",
            &[("cluster_queue", "team-b")]
        ),
        Some(1.0)
    );
    // Kueue's counters, queue status and hierarchy, LocalQueue and cohort
    // subtree series (metrics.rs): the same run, from the same ledger.
    for (q, admitted) in [("team-a", 4.0), ("team-b", 1.0)] {
        let l = [("cluster_queue", q)];
        assert_eq!(get(m, "kueue_admitted_workloads_total", &l), Some(admitted));
        assert_eq!(
            get(m, "kueue_quota_reserved_workloads_total", &l),
            Some(admitted)
        );
        assert_eq!(
            get(m, "kueue_quota_reserved_wait_time_seconds_count", &l),
            Some(admitted)
        );
        assert_eq!(
            get(m, "kueue_admission_checks_wait_time_seconds_sum", &l),
            Some(0.0)
        );
        for (status, value) in [("active", 1.0), ("pending", 0.0), ("terminating", 0.0)] {
            assert_eq!(
                get(m, "kueue_cluster_queue_status", &[l[0], ("status", status)]),
                Some(value),
                "{q} {status}"
            );
        }
        assert_eq!(
            get(
                m,
                "kueue_cluster_queue_info",
                &[
                    l[0],
                    ("parent_cohort", "research"),
                    ("root_cohort", "research")
                ]
            ),
            Some(1.0)
        );
    }
    assert_eq!(
        get(
            m,
            "kueue_reserving_active_workloads",
            &[("cluster_queue", "team-a")]
        ),
        Some(3.0)
    );
    // quick finished (and is kept for --finished-retention).
    assert_eq!(
        get(
            m,
            "kueue_finished_workloads",
            &[("cluster_queue", "team-a")]
        ),
        Some(1.0)
    );
    // a4 waits with 8 GPUs.
    assert_eq!(
        get(
            m,
            "kueue_cluster_queue_resource_pending",
            &[("cluster_queue", "team-a"), ("resource", "nvidia.com/gpu")]
        ),
        Some(8.0)
    );
    let lq = [("name", "team-a"), ("namespace", "default")];
    for (series, extra, value) in [
        ("kueue_local_queue_status", Some(("active", "True")), 1.0),
        ("kueue_local_queue_status", Some(("active", "False")), 0.0),
        (
            "kueue_local_queue_pending_workloads",
            Some(("status", "inadmissible")),
            1.0,
        ),
        (
            "kueue_local_queue_pending_workloads",
            Some(("status", "active")),
            0.0,
        ),
        ("kueue_local_queue_admitted_active_workloads", None, 3.0),
        ("kueue_local_queue_reserving_active_workloads", None, 3.0),
        ("kueue_local_queue_finished_workloads", None, 1.0),
        (
            "kueue_local_queue_resource_usage",
            Some(("flavor", "h100-80gb")),
            12.0,
        ),
    ] {
        let mut labels = lq.to_vec();
        labels.extend(extra);
        if series.ends_with("resource_usage") {
            labels.push(("resource", "nvidia.com/gpu"));
        }
        assert_eq!(get(m, series, &labels), Some(value), "{series} {labels:?}");
    }
    let research = [
        ("cohort", "research"),
        ("flavor", "h100-80gb"),
        ("resource", "nvidia.com/gpu"),
    ];
    assert_eq!(get(m, "kueue_cohort_subtree_quota", &research), Some(16.0));
    assert_eq!(
        get(m, "kueue_cohort_subtree_resource_reservations", &research),
        Some(14.0)
    );
    assert_eq!(
        get(
            m,
            "kueue_cohort_subtree_admitted_workloads_total",
            &[("cohort", "research")]
        ),
        Some(5.0)
    );
    assert_eq!(
        get(
            m,
            "kueue_cohort_subtree_admitted_active_workloads",
            &[("cohort", "research")]
        ),
        Some(4.0)
    );
    assert!(
        m.keys().any(|(name, labels)| name == "kueue_build_info"
            && labels
                .get("git_version")
                .is_some_and(|v| v.starts_with('v'))
            && labels.get("compiler").map(String::as_str) == Some("rustc")),
        "kueue_build_info is served"
    );

    let allocated: f64 = ["dev-east", "dev-west"]
        .iter()
        .filter_map(|c| {
            get(
                m,
                "fleetq_cluster_allocated",
                &[
                    ("cluster", c),
                    ("flavor", "h100-80gb"),
                    ("resource", "nvidia.com/gpu"),
                ],
            )
        })
        .sum();
    assert_eq!(allocated, 14.0);
    // Everything admitted is running: the quota-leak canary is quiet.
    for q in ["team-a", "team-b"] {
        for c in ["dev-east", "dev-west"] {
            assert_eq!(
                get(
                    m,
                    "fleetq_quota_reserved_not_running",
                    &[("cluster_queue", q), ("cluster", c)]
                ),
                Some(0.0)
            );
        }
    }

    // Raft: one leader, known to all; it counted its admission attempts,
    // its writes and its agents' heartbeats.
    let leaders: Vec<usize> = scrapes
        .iter()
        .enumerate()
        .filter(|(_, s)| get(s, "fleetq_raft_is_leader", &[]) == Some(1.0))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(leaders.len(), 1, "exactly one leader: {leaders:?}");
    let leader = &scrapes[leaders[0]];
    let leader_id = (leaders[0] + 1) as f64;
    for s in &scrapes {
        assert_eq!(get(s, "fleetq_raft_leader", &[]), Some(leader_id));
        let applied = get(s, "fleetq_raft_applied_index", &[]).unwrap_or(0.0);
        let commit = get(s, "fleetq_raft_commit_index", &[]).unwrap_or(0.0);
        assert!(applied > 0.0 && commit >= applied, "{applied} {commit}");
    }
    assert!(
        get(
            leader,
            "kueue_admission_attempts_total",
            &[("result", "success")]
        )
        .is_some_and(|n| n >= 1.0),
        "the leader admitted work"
    );
    assert!(
        get(leader, "fleetq_raft_append_latency_seconds_count", &[]).is_some_and(|n| n > 0.0),
        "the leader timed its writes"
    );
    for c in ["dev-east", "dev-west"] {
        let age = get(
            leader,
            "fleetq_cluster_lease_age_seconds",
            &[("cluster", c)],
        );
        assert!(age.is_some_and(|a| a < 10.0), "{c}'s agent beats: {age:?}");
    }

    // SIGTERM still stops it cleanly, HTTP servers included.
    let status = Command::new("kill")
        .args(["-TERM", &dev.child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(status) = dev.child.0.try_wait().expect("wait") {
            assert!(status.success(), "fleetq dev exited with {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "fleetq dev did not stop within 15 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        http_get(&https[0], "/healthz").is_none(),
        "the HTTP server is gone with the process"
    );
}

#[test]
fn a_server_serves_http_from_its_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listen = format!("127.0.0.1:{}", common::free_port());
    let http = format!("127.0.0.1:{}", common::free_port());
    let config = format!(
        "id = 1\nlisten = \"{listen}\"\ndata_dir = \"{}\"\npeers = [\"1={listen}\"]\nhttp_listen = \"{http}\"\nreserved_not_running_after = \"2m\"\n",
        dir.path().join("node-1").display()
    );
    let path = write_file(dir.path(), "server.toml", &config);
    let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
    let child = Command::new(FLEETQ)
        .args(["server", "--config", path.to_str().expect("utf-8 path")])
        .arg(INSECURE)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq server starts");
    let mut guard = Dev::new(child, dir.path().join("server.log"), dir);
    let ready = wait_for(Duration::from_secs(20), || {
        http_get(&http, "/readyz").filter(|(s, _)| *s == 200)
    });
    assert!(ready.is_some(), "never ready: {}", guard.log());
    let (status, body) = http_get(&http, "/metrics").expect("metrics answers");
    assert_eq!(status, 200);
    let m = parse_metrics(&body);
    assert_eq!(get(&m, "fleetq_raft_is_leader", &[]), Some(1.0), "{body}");
    assert_eq!(get(&m, "fleetq_raft_leader", &[]), Some(1.0));
    assert!(
        guard
            .log()
            .contains(&format!("serving http://{http}/metrics")),
        "{}",
        guard.log()
    );
    let _ = guard.child.0.kill();
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {}", text(&out));
    assert!(
        stderr.contains(needle),
        "{args:?}: the error names {needle}: {stderr}"
    );
}

#[test]
fn bad_http_and_canary_settings_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("d");
    let data = data.to_str().expect("utf-8 path");
    let listen = format!("127.0.0.1:{}", common::free_port());
    // Plaintext, so that a check made after the TLS setup (the taken
    // port) is reached; the config file below is read before it.
    let server = [
        "server",
        INSECURE,
        "--id",
        "1",
        "--listen",
        &listen,
        "--data-dir",
        data,
    ];

    fails_naming(&["dev", "--http-listen", "localhost"], "--http-listen");
    fails_naming(
        &["dev", "--http-listen", "127.0.0.1:65535"],
        "--http-listen",
    );
    fails_naming(
        &["dev", "--reserved-not-running-after", "soon"],
        "--reserved-not-running-after",
    );
    fails_naming(
        &["dev", "--reserved-not-running-after", "0s"],
        "--reserved-not-running-after",
    );
    fails_naming(
        &[&server[..], &["--http-listen", "300.1.1.1:80"]].concat(),
        "--http-listen",
    );
    fails_naming(
        &[&server[..], &["--reserved-not-running-after", "5 parsecs"]].concat(),
        "--reserved-not-running-after",
    );
    // A taken port: refused before the node starts, naming the flag.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = taken.local_addr().expect("addr").to_string();
    fails_naming(
        &[&server[..], &["--http-listen", taken.as_str()]].concat(),
        "--http-listen",
    );
    assert!(
        !dir.path().join("d").exists(),
        "nothing was created for a refused start"
    );
    // The config file key is checked as well.
    let path = write_file(
        dir.path(),
        "bad.toml",
        &format!(
            "id = 1\nlisten = \"{listen}\"\ndata_dir = \"{data}\"\nhttp_listen = \"nowhere\"\n"
        ),
    );
    fails_naming(
        &["server", "--config", path.to_str().expect("utf-8 path")],
        "http_listen",
    );
}
