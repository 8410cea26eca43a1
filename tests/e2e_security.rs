//! Mutual TLS and authorization end to end: three `fleetq server`
//! processes with certificates from `fleetq certs`, an authorization
//! policy with an admin and a tenant, a real agent; then every refusal
//! path of issue 8, each checked to be refused, counted in
//! `fleetq_requests_refused_total{reason}` and to leave the replicas'
//! state hash unchanged.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{free_port, http, text, wait_for};
use serde_json::Value;

const FLEETQ: &str = env!("CARGO_BIN_EXE_fleetq");

const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100-80gb}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: team-a, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: team-b, namespace: team-b}
spec: {clusterQueue: team-a}
"#;

const ROGUE_CQ: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: rogue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 1000}
"#;

fn run(args: &[&str]) -> Output {
    Command::new(FLEETQ)
        .args(args)
        .env_remove("FLEETQ_TLS_DIR")
        .env_remove("FLEETQ_INSECURE")
        .env_remove("FLEETQ_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("fleetq runs")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Three TLS servers, their certificates and policy.
struct Fleet {
    dir: tempfile::TempDir,
    tls: PathBuf,
    addrs: Vec<String>,
    http: Vec<String>,
    children: Vec<Child>,
    token: String,
}

impl Fleet {
    fn start() -> Fleet {
        Fleet::start_with(&[])
    }

    /// Three nodes, each with `extra` server flags.
    fn start_with(extra: &[&str]) -> Fleet {
        let dir = tempfile::tempdir().expect("temp dir");
        let tls = dir.path().join("tls");
        let t = s(&tls);
        ok(&["certs", "init", "--dir", t]);
        for id in ["1", "2", "3"] {
            ok(&["certs", "issue", "--dir", t, "node", "--id", id]);
        }
        ok(&["certs", "issue", "--dir", t, "agent", "--cluster", "east"]);
        ok(&[
            "certs", "issue", "--dir", t, "--name", "client", "client", "--tenant", "admin",
        ]);
        ok(&["certs", "issue", "--dir", t, "client", "--tenant", "team-a"]);
        // A second CA, trusted by nobody, with an admin certificate.
        let other = dir.path().join("other");
        ok(&["certs", "init", "--dir", s(&other)]);
        ok(&[
            "certs",
            "issue",
            "--dir",
            s(&other),
            "--name",
            "client",
            "client",
            "--tenant",
            "admin",
        ]);
        let printed = ok(&["certs", "token"]);
        let mut lines = printed.lines();
        let token = lines.next().expect("token line").trim().to_string();
        let digest = lines.next().expect("digest line").trim().to_string();
        assert!(digest.starts_with("sha256:"), "{printed}");
        let policy = format!(
            "tenants:\n  - name: admin\n    admin: true\n  - name: team-a\n    namespaces: [team-a]\n    tokens: [\"{digest}\"]\n"
        );
        std::fs::write(dir.path().join("policy.yaml"), policy).expect("policy");

        let addrs: Vec<String> = (0..3)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let http: Vec<String> = (0..3)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let peers = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut fleet = Fleet {
            tls,
            addrs,
            http,
            children: Vec::new(),
            token,
            dir,
        };
        for id in 1..=3 {
            let log = std::fs::File::create(fleet.dir.path().join(format!("node-{id}.log")))
                .expect("log");
            let child = Command::new(FLEETQ)
                .args(["--tls-dir", s(&fleet.tls), "server"])
                .args(["--id", &id.to_string(), "--listen", &fleet.addrs[id - 1]])
                .args([
                    "--data-dir",
                    s(&fleet.dir.path().join(format!("node-{id}"))),
                ])
                .args(["--peers", &peers, "--http-listen", &fleet.http[id - 1]])
                .args(["--auth-policy", s(&fleet.dir.path().join("policy.yaml"))])
                .args(extra)
                .env_remove("FLEETQ_INSECURE")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("fleetq server starts");
            fleet.children.push(child);
        }
        fleet
    }

    /// The CLI against node 1 as the admin (client.pem) plus `extra`
    /// global flags.
    fn cli(&self, extra: &[&str], args: &[&str]) -> Output {
        let mut all = vec!["--server", &self.addrs[0], "--tls-dir", s(&self.tls)];
        all.extend_from_slice(extra);
        all.extend_from_slice(args);
        run(&all)
    }

    fn admin(&self, args: &[&str]) -> Output {
        self.cli(&[], args)
    }

    fn apply(&self, extra: &[&str], yaml: &str) -> Output {
        let path = self.dir.path().join("apply.yaml");
        std::fs::write(&path, yaml).expect("manifest");
        self.cli(extra, &["apply", "-f", s(&path)])
    }

    /// Every node's state hash once all agree and have applied the same
    /// index.
    fn converged_hash(&self) -> String {
        wait_for(Duration::from_secs(20), || {
            let mut seen = Vec::new();
            for a in &self.addrs {
                let out = run(&[
                    "--server",
                    a,
                    "--tls-dir",
                    s(&self.tls),
                    "status",
                    "-o",
                    "json",
                ]);
                let v: Value = serde_json::from_slice(&out.stdout).ok()?;
                seen.push((v["lastApplied"].clone(), v["stateHash"].clone()));
            }
            seen.windows(2)
                .all(|w| w[0] == w[1])
                .then(|| seen[0].1.as_str().unwrap_or_default().to_string())
        })
        .expect("the replicas converge")
    }

    /// `fleetq_requests_refused_total{reason}` summed over the nodes.
    fn refused(&self, reason: &str) -> u64 {
        let needle = format!("fleetq_requests_refused_total{{reason=\"{reason}\"}} ");
        self.http
            .iter()
            .filter_map(|h| http(h, "GET", "/metrics", Duration::from_secs(5)))
            .map(|r| {
                r.body
                    .lines()
                    .find_map(|l| l.strip_prefix(&needle))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .unwrap_or(0.0) as u64
            })
            .sum()
    }

    fn logs(&self) -> String {
        (1..=3)
            .map(|id| {
                std::fs::read_to_string(self.dir.path().join(format!("node-{id}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Checks that `attempt` is refused with `want` in its output, counted
    /// under `reason` and changes nothing.
    fn assert_refused(
        &self,
        what: &str,
        reason: &str,
        want: &str,
        attempt: impl FnOnce() -> Output,
    ) {
        let before_hash = self.converged_hash();
        let before = self.refused(reason);
        let out = attempt();
        assert!(!out.status.success(), "{what}: not refused: {}", text(&out));
        assert!(
            text(&out).contains(want),
            "{what}: expected {want:?} in: {}",
            text(&out)
        );
        let counted = wait_for(Duration::from_secs(5), || {
            (self.refused(reason) > before).then_some(())
        });
        assert!(
            counted.is_some(),
            "{what}: {reason} not counted ({before} before)"
        );
        assert_eq!(
            self.converged_hash(),
            before_hash,
            "{what}: the state changed"
        );
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A child process killed when dropped (a failed assertion must not leave
/// an agent running).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn agent(fleet: &Fleet, cluster: &str, cert: &str) -> Running {
    let log =
        std::fs::File::create(fleet.dir.path().join(format!("agent-{cluster}.log"))).expect("log");
    Command::new(FLEETQ)
        .args([
            "--server",
            &fleet.addrs.join(","),
            "--tls-dir",
            s(&fleet.tls),
        ])
        .args(["--tls-cert", s(&fleet.tls.join(format!("{cert}.pem")))])
        .args(["--tls-key", s(&fleet.tls.join(format!("{cert}-key.pem")))])
        .args(["agent", "--cluster", cluster, "--inventory", "static"])
        .args([
            "--static-inventory",
            "h100-80gb=8",
            "--executor",
            "simulated",
        ])
        .env_remove("FLEETQ_INSECURE")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .map(Running)
        .expect("fleetq agent starts")
}

#[test]
fn mutual_tls_and_authorization_refuse_and_count_and_change_nothing() {
    let fleet = Fleet::start();
    let leader = wait_for(Duration::from_secs(30), || {
        let out = fleet.admin(&["status", "-o", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["leaderId"].as_u64()? != 0).then_some(())
    });
    assert!(leader.is_some(), "no leader over TLS:\n{}", fleet.logs());

    // The admin configures; the tenant works in its namespace, by
    // certificate and by token; the agent of east registers and runs.
    let out = fleet.apply(&[], CONFIG);
    assert!(out.status.success(), "admin apply: {}", text(&out));
    let east = agent(&fleet, "east", "agent-east");
    let ready = wait_for(Duration::from_secs(30), || {
        let out = fleet.admin(&["get", "clusters"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("Ready")
            .then_some(())
    });
    assert!(ready.is_some(), "agent east over TLS did not register");
    let team_a_files = [
        "--tls-cert".to_string(),
        fleet.tls.join("client-team-a.pem").display().to_string(),
        "--tls-key".to_string(),
        fleet
            .tls
            .join("client-team-a-key.pem")
            .display()
            .to_string(),
    ];
    let team_a_cert: Vec<&str> = team_a_files.iter().map(String::as_str).collect();
    let submit = |extra: &[&str], ns: &str, name: &str| {
        fleet.cli(
            extra,
            &[
                "submit",
                "-n",
                ns,
                "--queue",
                &format!("team-{}", &ns[5..]),
                "--name",
                name,
                "--request",
                "nvidia.com/gpu=1",
                "--duration",
                "1h",
            ],
        )
    };
    let out = submit(&team_a_cert, "team-a", "by-cert");
    assert!(
        out.status.success(),
        "tenant by certificate: {}",
        text(&out)
    );
    let out = submit(&["--token", &fleet.token], "team-a", "by-token");
    assert!(out.status.success(), "tenant by token: {}", text(&out));
    // Both run (an hour each), so the ledger holds still from here on.
    let running = wait_for(Duration::from_secs(30), || {
        let out = fleet.cli(&team_a_cert, &["get", "workloads", "-n", "team-a"]);
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        (table.matches("Running").count() == 2).then_some(table)
    });
    assert!(running.is_some(), "the tenant's workloads did not start");

    // 1. No certificate and no token.
    let ca = fleet.tls.join("ca.pem");
    fleet.assert_refused(
        "no certificate",
        "unauthenticated",
        "no client certificate",
        || {
            run(&[
                "--server",
                &fleet.addrs[0],
                "--tls-ca",
                s(&ca),
                "--tls-dir",
                "/nonexistent",
                "submit",
                "-n",
                "team-a",
                "--queue",
                "team-a",
                "--name",
                "anon",
                "--request",
                "nvidia.com/gpu=1",
            ])
        },
    );
    // 2. A certificate from another CA (an admin's, even).
    let other = fleet.dir.path().join("other");
    fleet.assert_refused(
        "another CA",
        "tls_handshake",
        "does the server trust this client",
        || {
            run(&[
                "--server",
                &fleet.addrs[0],
                "--tls-ca",
                s(&ca),
                "--tls-dir",
                s(&other),
                "apply",
                "-f",
                "/dev/null",
            ])
        },
    );
    // 3. Plaintext against a TLS server.
    fleet.assert_refused("plaintext", "tls_handshake", "", || {
        run(&["--server", &fleet.addrs[0], "--insecure", "get", "cq"])
    });
    // 4. A tenant submitting to a foreign namespace, by certificate and by token.
    fleet.assert_refused(
        "foreign namespace",
        "forbidden",
        "may not submit in namespace \"team-b\"",
        || submit(&team_a_cert, "team-b", "intruder"),
    );
    fleet.assert_refused(
        "foreign namespace by token",
        "forbidden",
        "namespace \"team-b\"",
        || submit(&["--token", &fleet.token], "team-b", "intruder-2"),
    );
    // 4b. A tenant stopping, or reading the output of, a workload of a
    // foreign namespace.
    fleet.assert_refused(
        "foreign namespace stop",
        "forbidden",
        "may not cancel in namespace \"team-b\"",
        || fleet.cli(&team_a_cert, &["stop", "wl", "anything", "-n", "team-b"]),
    );
    fleet.assert_refused(
        "foreign namespace logs",
        "forbidden",
        "may not get in namespace \"team-b\"",
        || fleet.cli(&team_a_cert, &["logs", "anything", "-n", "team-b"]),
    );
    // 5. A non-admin applying a ClusterQueue.
    fleet.assert_refused(
        "non-admin ClusterQueue",
        "forbidden",
        "only admins may apply cluster-scoped objects",
        || fleet.apply(&["--token", &fleet.token], ROGUE_CQ),
    );
    // 6. A non-admin changing the Raft group.
    fleet.assert_refused(
        "non-admin membership",
        "forbidden",
        "only admins may change the Raft group",
        || fleet.cli(&team_a_cert, &["members", "set-voters", "1"]),
    );
    // 6b. A non-admin taking a backup of the whole ledger: nothing written.
    let stolen = std::env::temp_dir().join(format!("fleetq-stolen-{}.fqb", std::process::id()));
    fleet.assert_refused(
        "non-admin backup",
        "forbidden",
        "only admins may take backups of the ledger",
        || fleet.cli(&team_a_cert, &["backup", "--out", s(&stolen)]),
    );
    assert!(
        !stolen.exists(),
        "a refused backup wrote {}",
        stolen.display()
    );
    let out = fleet.admin(&["backup", "--out", s(&stolen)]);
    assert!(out.status.success(), "admin backup: {}", text(&out));
    let _ = std::fs::remove_file(&stolen);
    // 7. An agent speaking for another cluster with east's certificate.
    let hash = fleet.converged_hash();
    let before = fleet.refused("foreign_cluster");
    let rogue = agent(&fleet, "west", "agent-east");
    let counted = wait_for(Duration::from_secs(20), || {
        (fleet.refused("foreign_cluster") > before).then_some(())
    });
    drop(rogue);
    assert!(
        counted.is_some(),
        "foreign cluster not refused:\n{}",
        fleet.logs()
    );
    let out = fleet.admin(&["get", "clusters"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("west"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fleet.converged_hash(),
        hash,
        "the rogue agent changed the state"
    );
    // 8. A tenant certificate naming a tenant the policy lacks.
    ok(&[
        "certs",
        "issue",
        "--dir",
        s(&fleet.tls),
        "client",
        "--tenant",
        "mallory",
    ]);
    let mallory = [
        "--tls-cert".to_string(),
        fleet.tls.join("client-mallory.pem").display().to_string(),
        "--tls-key".to_string(),
        fleet
            .tls
            .join("client-mallory-key.pem")
            .display()
            .to_string(),
    ];
    let mallory: Vec<&str> = mallory.iter().map(String::as_str).collect();
    fleet.assert_refused(
        "unknown tenant",
        "forbidden",
        "not in the authorization policy",
        || fleet.cli(&mallory, &["get", "cq"]),
    );

    // The policy reloads: team-a gains team-b, and the same submission
    // that was refused goes through.
    let policy = fleet.dir.path().join("policy.yaml");
    let text_before = std::fs::read_to_string(&policy).expect("policy");
    std::fs::write(&policy, text_before.replace("[team-a]", "[team-a, team-b]")).expect("policy");
    let allowed = wait_for(Duration::from_secs(15), || {
        submit(&team_a_cert, "team-b", "after-reload")
            .status
            .success()
            .then_some(())
    });
    assert!(allowed.is_some(), "policy not reloaded:\n{}", fleet.logs());

    // Who submitted each workload is recorded from the caller's identity
    // (issue 29 item 2), whatever the manifest says, and filters.
    let forged = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: forged, namespace: team-a, labels: {fleetq.dev/submitted-by: admin}}\nspec:\n  queueName: team-a\n  podSets:\n  - name: main\n    count: 1\n    template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: \"1\"}}}]}}\n";
    let out = fleet.apply(&["--token", &fleet.token], forged);
    assert!(out.status.success(), "{}", text(&out));
    let mine = fleet.cli(
        &team_a_cert,
        &[
            "get",
            "workloads",
            "-n",
            "team-a",
            "--user",
            "team-a",
            "-o",
            "wide",
        ],
    );
    let table = String::from_utf8_lossy(&mine.stdout).into_owned();
    for name in ["by-cert", "by-token", "forged"] {
        assert!(
            table
                .lines()
                .any(|l| l.contains(name) && l.contains("team-a")),
            "{name} not listed as team-a's:\n{table}"
        );
    }
    let admins = fleet.cli(
        &team_a_cert,
        &["get", "workloads", "-n", "team-a", "--user", "admin"],
    );
    let table = String::from_utf8_lossy(&admins.stdout).into_owned();
    assert!(
        !table.contains("forged"),
        "a forged submitter was kept:\n{table}"
    );
    let described = fleet.cli(
        &team_a_cert,
        &["describe", "workload", "forged", "-n", "team-a"],
    );
    assert!(
        String::from_utf8_lossy(&described.stdout).contains("Submitted by:  team-a"),
        "{}",
        text(&described)
    );
    drop(east);
}

/// Issue 25, item 5: node certificates grant peer rights only, to members
/// only; a Raft message must come from the node its certificate names;
/// and the Raft service refuses a caller without a member's certificate
/// before reading its message.
#[test]
fn peers_are_authenticated_as_themselves() {
    use fleetq_proto::tls::{tls_channel, Tls, TlsFiles};
    use fleetq_proto::transport::Timeouts;
    use fleetq_proto::v1 as pb;

    let fleet = Fleet::start();
    let up = wait_for(Duration::from_secs(20), || {
        fleet.admin(&["get", "cq"]).status.success().then_some(())
    });
    assert!(up.is_some(), "the group never answered: {}", fleet.logs());
    let t = s(&fleet.tls);
    ok(&["certs", "issue", "--dir", t, "node", "--id", "9"]);
    let as_node = |id: &str| {
        let cert = fleet.tls.join(format!("node-{id}.pem"));
        let key = fleet.tls.join(format!("node-{id}-key.pem"));
        [
            "--tls-cert".to_string(),
            cert.display().to_string(),
            "--tls-key".to_string(),
            key.display().to_string(),
        ]
    };
    let flavor =
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rogue}\n";
    // A certificate for a node that is not a member: refused everywhere.
    let nine = as_node("9");
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    fleet.assert_refused(
        "node 9 applies",
        "forbidden",
        "node 9 is not a member",
        || fleet.apply(&nine, flavor),
    );
    // A member's certificate: peer rights only, no admin.
    let two = as_node("2");
    let two: Vec<&str> = two.iter().map(String::as_str).collect();
    fleet.assert_refused("node 2 applies", "forbidden", "peer rights only", || {
        fleet.apply(&two, flavor)
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _context = runtime.enter();
    let raft = |files: TlsFiles| {
        let tls = Tls::load(files).expect("client TLS");
        let channel =
            tls_channel(&fleet.addrs[0], &Timeouts::default(), &tls, None).expect("channel");
        pb::raft_client::RaftClient::new(channel).max_encoding_message_size(usize::MAX)
    };
    // Node 2's certificate sending a Vote as node 3.
    let forged = serde_json::json!({
        "vote": {"leader_id": {"term": 99, "node_id": 3}, "committed": false},
        "last_log_id": null
    });
    let err = runtime
        .block_on(
            raft(TlsFiles::in_dir(&fleet.tls, "node-2")).vote(pb::RaftPayload {
                json: serde_json::to_vec(&forged).expect("json"),
                error: String::new(),
                format: 0,
            }),
        )
        .expect_err("a forged sender is refused");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    assert!(
        err.message()
            .contains("from node 2 claims to come from node 3"),
        "{}",
        err.message()
    );
    // No client certificate at all: 64 MB refused before it is read.
    let anonymous = TlsFiles {
        ca: fleet.tls.join("ca.pem"),
        identity: None,
    };
    let err = runtime
        .block_on(raft(anonymous).append_entries(pb::RaftPayload {
            json: vec![b' '; 64 << 20],
            error: String::new(),
            format: 0,
        }))
        .expect_err("an anonymous Raft message is refused");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    assert!(
        err.message().contains("no client certificate"),
        "{}",
        err.message()
    );
    // The client API and the Agent service identify the caller from its
    // headers too. 64 MB is far above --max-request-bytes: had the body
    // been read first, decoding would have refused it as too large.
    let anonymous = || TlsFiles {
        ca: fleet.tls.join("ca.pem"),
        identity: None,
    };
    let bearer = |token: &str| {
        let value: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
            format!("Bearer {token}").parse().expect("header");
        move |mut request: tonic::Request<()>| {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
            Ok(request)
        }
    };
    let channel = |files: TlsFiles| {
        let tls = Tls::load(files).expect("client TLS");
        tls_channel(&fleet.addrs[0], &Timeouts::default(), &tls, None).expect("channel")
    };
    let huge = || pb::ApplyRequest {
        manifests: " ".repeat(64 << 20),
        dry_run: false,
    };
    let err = runtime
        .block_on(
            pb::fleet_q_client::FleetQClient::with_interceptor(
                channel(anonymous()),
                bearer("not-a-token-anyone-issued"),
            )
            .max_encoding_message_size(usize::MAX)
            .apply(huge()),
        )
        .expect_err("an unknown token is refused");
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    assert!(
        err.message()
            .contains("the bearer token is not in the authorization policy"),
        "{}",
        err.message()
    );
    let err = runtime
        .block_on(
            pb::fleet_q_client::FleetQClient::new(channel(anonymous()))
                .max_encoding_message_size(usize::MAX)
                .apply(huge()),
        )
        .expect_err("no token and no certificate is refused");
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    // A tenant's valid token on the Agent service: not an agent.
    let err = runtime
        .block_on(
            pb::agent_client::AgentClient::with_interceptor(
                channel(anonymous()),
                bearer(&fleet.token),
            )
            .max_encoding_message_size(usize::MAX)
            .report(pb::ReportRequest {
                cluster: "x".repeat(64 << 20),
                ..Default::default()
            }),
        )
        .expect_err("a tenant on the Agent service is refused");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    assert!(
        err.message()
            .contains("only agents may use the Agent service"),
        "{}",
        err.message()
    );
    // The group still answers, with the same leader.
    assert!(fleet.admin(&["get", "cq"]).status.success());
}

/// Issue 25, item 6: the HTTP listener shows workloads per namespace. A
/// caller without a token sees cluster-wide figures only (and the
/// visibility API refuses it), a tenant's token its own namespaces,
/// `/healthz` and `/readyz` stay open.
#[test]
fn the_http_side_shows_each_tenant_its_own_namespaces() {
    let fleet = Fleet::start();
    let up = wait_for(Duration::from_secs(20), || {
        fleet.admin(&["get", "cq"]).status.success().then_some(())
    });
    assert!(up.is_some(), "the group never answered: {}", fleet.logs());
    let out = fleet.apply(&[], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    // Per namespace, one workload that waits (16 GPUs against a quota of
    // 8) and one admitted (1 GPU) on a cluster.
    let _east = agent(&fleet, "east", "agent-east");
    for (size, gpus) in [("big", "16"), ("small", "1")] {
        for ns in ["team-a", "team-b"] {
            let name = format!("{size}-{ns}");
            let request = format!("nvidia.com/gpu={gpus}");
            let out = fleet.admin(&[
                "submit",
                "-n",
                ns,
                "--queue",
                ns,
                "--name",
                &name,
                "--request",
                &request,
            ]);
            assert!(out.status.success(), "{}", text(&out));
        }
    }
    let get = |path: &str, token: Option<&str>| {
        let headers = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        wait_for(Duration::from_secs(10), || {
            common::http_with(
                &fleet.http[0],
                "GET",
                path,
                &headers,
                Duration::from_secs(5),
            )
        })
        .expect("the HTTP listener answers")
    };
    assert_eq!(get("/healthz", None).status, 200);
    assert_eq!(get("/readyz", None).status, 200);
    let names = |body: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(body).expect("JSON");
        v["pending"]["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w["name"].as_str().map(String::from))
            .collect()
    };
    // Anonymous: the totals, no workload.
    let overview = wait_for(Duration::from_secs(10), || {
        let r = get("/api/v1/overview", None);
        let v: Value = serde_json::from_str(&r.body).ok()?;
        (v["pending"]["total"].as_u64() == Some(2)).then_some(r)
    })
    .expect("the overview counts both");
    assert!(names(&overview.body).is_empty(), "{}", overview.body);
    // Nor an admitted workload's name, nor the state hash.
    let placed = |body: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(body).expect("JSON");
        v["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["workloads"].as_array().cloned().unwrap_or_default())
            .filter_map(|w| w["name"].as_str().map(String::from))
            .collect()
    };
    let admitted = |v: &Value| -> u64 {
        v["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["workloadCount"].as_u64())
            .sum()
    };
    let overview = wait_for(Duration::from_secs(10), || {
        let r = get("/api/v1/overview", None);
        let v: Value = serde_json::from_str(&r.body).ok()?;
        (admitted(&v) == 2).then_some(r)
    })
    .expect("the overview counts both admitted workloads");
    assert!(placed(&overview.body).is_empty(), "{}", overview.body);
    let v: Value = serde_json::from_str(&overview.body).expect("JSON");
    assert_eq!(v["raft"]["stateHash"], "", "{}", overview.body);
    let r = get("/api/v1/overview", Some(&fleet.token));
    assert_eq!(placed(&r.body), ["small-team-a"], "{}", r.body);
    let pending = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/team-a/pendingworkloads";
    assert_eq!(get(pending, None).status, 401);
    // team-a's token: its namespace only.
    let r = get("/api/v1/overview", Some(&fleet.token));
    assert_eq!(names(&r.body), ["big-team-a"], "{}", r.body);
    let r = get(pending, Some(&fleet.token));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("big-team-a") && !r.body.contains("big-team-b"),
        "{}",
        r.body
    );
    // A token the policy does not know is refused.
    assert_eq!(get("/api/v1/overview", Some("not-a-token")).status, 401);
}

/// One HTTPS request (`--http-tls`) with the client certificate `as_who`
/// (a name in the fleet's TLS directory, or none) and `headers`.
fn https(
    fleet: &Fleet,
    path: &str,
    as_who: Option<&str>,
    headers: &str,
) -> Option<common::HttpReply> {
    use fleetq_proto::tls::{Tls, TlsFiles};
    use std::io::{Read, Write};
    let files = match as_who {
        Some(name) => TlsFiles::in_dir(&fleet.tls, name),
        None => TlsFiles {
            ca: fleet.tls.join("ca.pem"),
            identity: None,
        },
    };
    let tls = Tls::load(files).expect("client TLS");
    let mut config = (*tls.client_config()).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let addr = &fleet.http[0];
    let host = addr.rsplit_once(':').expect("host:port").0.to_string();
    let name = rustls_pki_types::ServerName::try_from(host).expect("server name");
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let tcp = std::net::TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    // A close without close_notify still leaves the whole reply read.
    let _ = stream.read_to_end(&mut raw);
    common::HttpReply::parse(&String::from_utf8_lossy(&raw))
}

/// Issue 25, item 6: with `--http-tls` the HTTP listener speaks HTTPS and
/// knows callers by the same client certificates as the API, or by a
/// bearer token, no longer sent in the clear.
#[test]
fn the_https_side_knows_client_certificates_and_tokens() {
    let fleet = Fleet::start_with(&["--http-tls"]);
    let up = wait_for(Duration::from_secs(20), || {
        fleet.admin(&["get", "cq"]).status.success().then_some(())
    });
    assert!(up.is_some(), "the group never answered: {}", fleet.logs());
    let out = fleet.apply(&[], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    for ns in ["team-a", "team-b"] {
        let name = format!("big-{ns}");
        let out = fleet.admin(&[
            "submit",
            "-n",
            ns,
            "--queue",
            ns,
            "--name",
            &name,
            "--request",
            "nvidia.com/gpu=16",
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let names = |body: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(body).unwrap_or_default();
        v["pending"]["workloads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w["name"].as_str().map(String::from))
            .collect()
    };
    let overview = |who: Option<&str>, headers: &str| {
        wait_for(Duration::from_secs(10), || {
            let r = https(&fleet, "/api/v1/overview", who, headers)?;
            let v: Option<Value> = serde_json::from_str(&r.body).ok();
            let counted = v.is_none_or(|v| v["pending"]["total"].as_u64() == Some(2));
            counted.then_some(r)
        })
        .expect("the HTTPS listener answers")
    };
    // Open to all, over TLS.
    let health = wait_for(Duration::from_secs(10), || {
        https(&fleet, "/healthz", None, "")
    });
    assert_eq!(health.map(|r| r.status), Some(200));
    // Anonymous: totals only.
    let r = overview(None, "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(names(&r.body).is_empty(), "{}", r.body);
    // team-a's certificate, and team-a's token: its namespace only.
    let r = overview(Some("client-team-a"), "");
    assert_eq!(names(&r.body), ["big-team-a"], "{}", r.body);
    let bearer = format!("Authorization: Bearer {}\r\n", fleet.token);
    let r = overview(None, &bearer);
    assert_eq!(names(&r.body), ["big-team-a"], "{}", r.body);
    // The admin's certificate: everything.
    let r = overview(Some("client"), "");
    let mut all = names(&r.body);
    all.sort();
    assert_eq!(all, ["big-team-a", "big-team-b"], "{}", r.body);
    // A certificate of a tenant the policy lacks is refused.
    ok(&[
        "certs",
        "issue",
        "--dir",
        s(&fleet.tls),
        "client",
        "--tenant",
        "mallory",
    ]);
    let r = https(&fleet, "/api/v1/overview", Some("client-mallory"), "").expect("a reply");
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(
        r.body
            .contains("tenant mallory is not in the authorization policy"),
        "{}",
        r.body
    );
    // Plain HTTP on the HTTPS port gets no page.
    let plain = common::http_with(
        &fleet.http[0],
        "GET",
        "/healthz",
        "",
        Duration::from_secs(5),
    );
    assert!(plain.as_ref().is_none_or(|r| r.status != 200), "{plain:?}");
}

/// Issue 27: an agent's front door (`--watch-queued-jobs`) works under
/// TLS. On the client API an agent's certificate may submit, read and
/// cancel the workloads of its own cluster's Jobs (their template's
/// `fleetq.dev/adopt-cluster`), and nothing else.
#[test]
fn an_agent_speaks_on_the_client_api_only_for_its_own_front_door() {
    use fleetq_proto::tls::{tls_channel, Tls, TlsFiles};
    use fleetq_proto::transport::Timeouts;
    use fleetq_proto::v1 as pb;

    let fleet = Fleet::start();
    let up = wait_for(Duration::from_secs(20), || {
        fleet.admin(&["get", "cq"]).status.success().then_some(())
    });
    assert!(up.is_some(), "the group never answered: {}", fleet.logs());
    let out = fleet.apply(&[], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    // A workload the admin submitted, which no front door made.
    let out = fleet.admin(&[
        "submit",
        "-n",
        "team-a",
        "--queue",
        "team-a",
        "--name",
        "admins",
        "--request",
        "nvidia.com/gpu=16",
    ]);
    assert!(out.status.success(), "{}", text(&out));

    // A Job as the front door imports it, adopted by `cluster`.
    let job = |name: &str, cluster: Option<&str>| -> String {
        let annotations = cluster
            .map(|c| {
                serde_json::json!({
                    "fleetq.dev/adopt-cluster": c,
                    "fleetq.dev/adopt-uid": format!("uid-{name}"),
                })
            })
            .unwrap_or_else(|| serde_json::json!({}));
        let manifest = serde_json::json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": "team-b",
                "labels": {"kueue.x-k8s.io/queue-name": "team-b"},
                "annotations": annotations,
            },
            "spec": {"suspend": true, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"nvidia.com/gpu": "16"},
                    "limits": {"nvidia.com/gpu": "16"},
                }}],
            }}},
        });
        let docs =
            fleetq_model::kueue::import_manifests(&manifest.to_string()).expect("the Job imports");
        match docs.into_iter().next().map(|d| d.object) {
            Some(fleetq_model::config::Object::Workload(mut w)) => {
                w.name = format!("job-{name}");
                serde_json::to_string(&w).expect("json")
            }
            other => panic!("not a workload: {other:?}"),
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _context = runtime.enter();
    let tls = Tls::load(TlsFiles::in_dir(&fleet.tls, "agent-east")).expect("agent TLS");
    let channel = tls_channel(&fleet.addrs[0], &Timeouts::default(), &tls, None).expect("channel");
    let mut api = pb::fleet_q_client::FleetQClient::new(channel);
    let submit = |api: &mut pb::fleet_q_client::FleetQClient<_>, id: &str, json: String| {
        runtime.block_on(api.submit(pb::SubmitRequest {
            request_id: id.into(),
            workload_json: json,
            workloads_json: Vec::new(),
        }))
    };
    // Its own cluster's Job: submitted, read, cancelled.
    submit(&mut api, "uid-mine", job("mine", Some("east"))).expect("east's front door submits");
    let reference = |name: &str| pb::WorkloadRef {
        namespace: "team-b".into(),
        name: name.into(),
        with_spec: false,
    };
    let mine = "job-mine".to_string();
    runtime
        .block_on(api.get_workload(reference(&mine)))
        .expect("east reads its own");
    // Another cluster's Job, or one no front door made: refused.
    for (what, json) in [
        ("west's", job("theirs", Some("west"))),
        ("no front door's", job("plain", None)),
    ] {
        let err = submit(&mut api, what, json).expect_err(what);
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{what}: {err:?}");
        assert!(
            err.message()
                .contains("only the workloads of its own cluster's Jobs"),
            "{}",
            err.message()
        );
    }
    // The admin's workload: neither read nor cancelled.
    let err = runtime
        .block_on(api.get_workload(pb::WorkloadRef {
            namespace: "team-a".into(),
            name: "admins".into(),
            with_spec: false,
        }))
        .expect_err("not east's");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    let err = runtime
        .block_on(api.cancel(pb::CancelRequest {
            namespace: "team-a".into(),
            name: "admins".into(),
        }))
        .expect_err("not east's");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    // Nor anything else on the client API.
    let err = runtime
        .block_on(api.apply(pb::ApplyRequest {
            manifests: CONFIG.into(),
            dry_run: false,
        }))
        .expect_err("no apply");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    runtime
        .block_on(api.cancel(pb::CancelRequest {
            namespace: "team-b".into(),
            name: mine.clone(),
        }))
        .expect("east cancels its own");
    let out = fleet.admin(&["get", "workload", "-n", "team-a", "admins"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Pending"),
        "{}",
        text(&out)
    );
}
