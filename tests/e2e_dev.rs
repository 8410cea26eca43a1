//! `fleetq dev` starts, answers the CLI with the sample configuration
//! loaded, admits a workload onto a simulated cluster and shuts down
//! cleanly on SIGTERM.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cli_tls, text, wait_for, FLEETQ};

/// A base port with the two after it free too.
fn three_free_ports() -> u16 {
    for _ in 0..100 {
        let base = common::free_port();
        if base > u16::MAX - 3 {
            continue;
        }
        let all_free = (base..base + 3).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no three consecutive free ports");
}

#[test]
fn dev_answers_the_cli_admits_and_stops_on_sigterm() {
    let port = three_free_ports();
    let addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = std::fs::File::create(dir.path().join("dev.log")).expect("log");
    // Mutual TLS with the certificates dev makes in the test's own
    // directory (never ~/.fleetq/tls); the CLI finds its client.pem there.
    let tls = dir.path().join("tls");
    let mut dev = Command::new(FLEETQ)
        .args(["dev", "--port", &port.to_string()])
        .arg("--tls-dir")
        .arg(&tls)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq dev starts");

    let out = wait_for(Duration::from_secs(30), || {
        // dev answers before it has loaded the sample; it announces itself
        // once the sample is in.
        let out = cli_tls(&addr, &tls, &["get", "cq"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains("team-b"))
            .then_some(out)
    })
    .unwrap_or_else(|| {
        let _ = dev.kill();
        panic!(
            "fleetq dev did not answer: {}",
            std::fs::read_to_string(dir.path().join("dev.log")).unwrap_or_default()
        )
    });
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("team-a") && table.contains("team-b"),
        "{table}"
    );

    let out = cli_tls(
        &addr,
        &tls,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "tour",
            "--request",
            "nvidia.com/gpu=4",
            "--duration",
            "1m",
            "--wait",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("on cluster dev-east") || stdout.contains("on cluster dev-west"),
        "{stdout}"
    );
    // Both simulated clusters register. The second may still be on its
    // way: with admission on submit, the tour can be admitted (on the
    // first one) within milliseconds of dev loading its sample.
    let mut clusters = serde_json::Value::Null;
    let registered = wait_for(Duration::from_secs(30), || {
        let out = cli_tls(&addr, &tls, &["get", "clusters", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out));
        clusters = serde_json::from_slice(&out.stdout).expect("json");
        (clusters.as_array().map(|a| a.len()) == Some(2)).then_some(())
    });
    assert!(
        registered.is_some(),
        "two clusters never registered: {clusters}"
    );

    // Fair sharing is off until a Kueue Configuration turns it on; the
    // Configuration is replicated, so any node's status shows it.
    let status = cli_tls(&addr, &tls, &["status"]);
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("Fair sharing:  off"),
        "{}",
        text(&status)
    );
    let config = dir.path().join("kueue-config.yaml");
    std::fs::write(
        &config,
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nnamespace: kueue-system\nmanageJobsWithoutQueueName: false\nfairSharing:\n  enable: true\n  preemptionStrategies: [LessThanInitialShare]\n",
    )
    .expect("write the Configuration");
    let out = cli_tls(&addr, &tls, &["apply", "-f", &config.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let other = format!("127.0.0.1:{}", port + 2);
    let on = wait_for(Duration::from_secs(10), || {
        let out = cli_tls(&other, &tls, &["status"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout.contains("Fair sharing:  on").then_some(stdout)
    })
    .expect("node 3 shows fair sharing on");
    assert!(on.contains("LessThanInitialShare"), "{on}");
    assert!(on.contains("from the Configuration"), "{on}");

    // SIGTERM: graceful shutdown, exit 0.
    let status = Command::new("kill")
        .args(["-TERM", &dev.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(status) = dev.try_wait().expect("wait") {
            assert!(status.success(), "fleetq dev exited with {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "fleetq dev did not stop within 15 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
