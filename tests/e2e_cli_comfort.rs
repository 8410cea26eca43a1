//! CLI comfort: shell completion scripts, `submit --wait` progress and exit
//! codes, `top --once`, and `-o wide` against a real `fleetq dev`.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cli_tls, text, wait_for, FLEETQ};

fn run(args: &[&str]) -> Output {
    Command::new(FLEETQ)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("fleetq runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn completion_scripts_name_the_binary_and_its_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completion", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out));
        let script = stdout(&out);
        assert!(script.len() > 1000, "{shell}: script too short:\n{script}");
        assert!(script.contains("fleetq"), "{shell}: {script}");
        for sub in [
            "submit",
            "describe",
            "top",
            "completion",
            "wait",
            "interval",
        ] {
            assert!(script.contains(sub), "{shell}: no {sub:?} in the script");
        }
    }
    // The scripts are what each shell expects.
    assert!(stdout(&run(&["completion", "bash"])).contains("complete -F"));
    assert!(stdout(&run(&["completion", "zsh"])).starts_with("#compdef fleetq"));
    assert!(stdout(&run(&["completion", "fish"])).contains("complete -c fleetq"));

    let help = stdout(&run(&["completion", "--help"]));
    for line in [
        "source <(fleetq completion bash)",
        "_fleetq",
        "~/.config/fish/completions/fleetq.fish",
    ] {
        assert!(help.contains(line), "help lacks {line:?}:\n{help}");
    }
}

#[test]
fn completion_refuses_an_unknown_shell_naming_the_choices() {
    let out = run(&["completion", "powershell2"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = stderr(&out);
    assert!(err.contains("invalid value 'powershell2'"), "{err}");
    assert!(err.contains("bash, zsh, fish"), "{err}");
    assert!(stdout(&out).is_empty(), "{}", text(&out));
}

#[test]
fn every_output_flag_names_itself_and_its_formats_on_a_bad_value() {
    for args in [
        &["get", "workloads", "-o", "bogus"][..],
        &["status", "-o", "bogus"],
        &["bench", "-o", "bogus"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = stderr(&out);
        assert!(
            err.contains("invalid value 'bogus' for '--output <OUTPUT>'"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("table, json, yaml, wide, fleetq-json"),
            "{args:?}: {err}"
        );
    }
}

/// `fleetq dev` on three consecutive ports below the ephemeral range (so
/// no other test's free_port() lands on them), with mutual TLS from the
/// certificates it makes in its own directory; stopped by SIGTERM.
struct Dev {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Dev {
    fn start() -> Dev {
        let base = (27460..27700)
            .step_by(3)
            .find(|&p| (p..p + 3).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()))
            .expect("three consecutive free ports in 27460..27700");
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("dev.log")).expect("log");
        let child = Command::new(FLEETQ)
            .args(["dev", "--port", &base.to_string()])
            .args(["--http-listen", "127.0.0.1:0"])
            .args(["--data-dir", &dir.path().join("data").display().to_string()])
            .args(["--tls-dir", &dir.path().join("tls").display().to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("fleetq dev starts");
        let dev = Dev {
            child,
            addr: format!("127.0.0.1:{base}"),
            dir,
        };
        // dev answers before the sample is loaded and before both agents
        // have registered; wait for both clusters Ready and both queues.
        let ready = wait_for(Duration::from_secs(60), || {
            let out = dev.cli(&["get", "clusters"]);
            let cq = dev.cli(&["get", "cq"]);
            let clusters = stdout(&out);
            let ready_rows = clusters
                .lines()
                .filter(|l| {
                    (l.contains("dev-west") || l.contains("dev-east")) && l.contains("Ready")
                })
                .count();
            (out.status.success() && ready_rows == 2 && stdout(&cq).contains("team-b"))
                .then_some(())
        });
        assert!(ready.is_some(), "fleetq dev did not come up: {}", dev.log());
        dev
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dev.log")).unwrap_or_default()
    }

    /// The CLI with the client certificate dev made (FLEETQ_TLS_DIR).
    fn cli(&self, args: &[&str]) -> Output {
        cli_tls(&self.addr, &self.dir.path().join("tls"), args)
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Submits `gpus` GPUs to team-a: one pod, or two pods of 4 for 8 GPUs
/// (the dev clusters' nodes have 4 GPUs each, so a larger pod fits none).
fn submit(dev: &Dev, name: &str, gpus: u32, duration: &str, extra: &[&str]) -> Output {
    let (per_pod, pods) = if gpus == 8 { (4, gpus / 4) } else { (gpus, 1) };
    let request = format!("nvidia.com/gpu={per_pod}");
    let count = pods.to_string();
    let mut args = vec![
        "submit",
        "--queue",
        "team-a",
        "--name",
        name,
        "--request",
        &request,
        "--count",
        &count,
        "--duration",
        duration,
    ];
    args.extend_from_slice(extra);
    dev.cli(&args)
}

#[test]
fn wait_top_and_wide_against_fleetq_dev() {
    let dev = Dev::start();

    // top --once: both queues with usage against nominal quota, both
    // clusters, the leader and its term; one frame, no escape codes.
    let out = dev.cli(&["top", "--once"]);
    assert!(out.status.success(), "{}", text(&out));
    let frame = stdout(&out);
    for want in [
        "leader ",
        "term ",
        "CLUSTERQUEUE",
        "USAGE/NOMINAL",
        "team-a",
        "team-b",
        "0/8 [----------] 0%",
        "CLUSTER ",
        "ASSIGNED/CAPACITY",
        "dev-east",
        "dev-west",
        "Ready",
    ] {
        assert!(frame.contains(want), "top lacks {want:?}:\n{frame}");
    }
    assert!(!frame.contains('\x1b'), "escape codes in --once:\n{frame}");
    assert_eq!(frame.matches("fleetq top").count(), 1, "{frame}");

    // Fill both clusters: team-a's 8 GPUs plus 8 borrowed from team-b.
    for name in ["fill-1", "fill-2"] {
        let out = submit(&dev, name, 8, "8s", &["--wait"]);
        assert!(out.status.success(), "{name}: {}", text(&out));
        assert!(stdout(&out).contains("on cluster dev-"), "{}", text(&out));
    }
    let frame = stdout(&dev.cli(&["top", "--once"]));
    assert!(
        frame.contains("16/8 [##########] 200%"),
        "team-a borrows 8:\n{frame}"
    );
    assert_eq!(
        frame.matches("8/8 [##########] 100%").count(),
        2,
        "both clusters full:\n{frame}"
    );
    // -o wide while they run: cluster, epoch and flavors.
    let out = dev.cli(&["get", "workloads", "-o", "wide"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = stdout(&out);
    let fill: Vec<&str> = table
        .lines()
        .find(|l| l.contains("fill-1"))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // NAMESPACE NAME QUEUE CLUSTERQUEUE PRIORITY PRIORITYCLASS USER
    // STATE POSITION CLUSTER EPOCH FLAVORS...
    assert_eq!(
        fill.get(6),
        Some(&"admin"),
        "the dev CLI's tenant:\n{table}"
    );
    assert!(
        fill.get(9).is_some_and(|c| c.starts_with("dev-")),
        "{table}"
    );
    assert!(
        fill.get(10).is_some_and(|e| e.parse::<u64>().is_ok()),
        "{table}"
    );
    assert_eq!(
        fill.get(11..13),
        Some(&["main:", "nvidia.com/gpu=h100-80gb"][..]),
        "{table}"
    );

    // The next one waits for a cluster to free up: progress on stderr (a
    // line per change, stderr is no terminal here), the outcome on stdout.
    let started = Instant::now();
    let out = submit(&dev, "queued", 8, "1s", &["--wait", "--timeout", "60s"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "queued was admitted while the clusters were full: {}",
        text(&out)
    );
    let progress = stderr(&out);
    assert!(
        progress.contains("default/queued: Pending, position 1 of 1 in ClusterQueue team-a"),
        "{}",
        text(&out)
    );
    assert!(progress.contains("insufficient unused quota"), "{progress}");
    let lines: Vec<&str> = progress.lines().collect();
    assert!(
        lines.windows(2).all(|w| w[0] != w[1]),
        "a line repeated without a change:\n{progress}"
    );
    assert!(
        !progress.contains('\x1b'),
        "spinner drawn on a pipe:\n{progress}"
    );
    let done = stdout(&out);
    assert!(
        done.contains("default/queued: Admitted on cluster dev-")
            || done.contains("default/queued: Running on cluster dev-"),
        "{}",
        text(&out)
    );

    // More than the cohort has: never fits, so --timeout ends the wait
    // with the pending reason and a non-zero exit; the workload stays.
    let started = Instant::now();
    let out = submit(&dev, "too-big", 100, "1m", &["--wait", "--timeout", "2s"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(took >= Duration::from_secs(2), "gave up early: {took:?}");
    assert!(took < Duration::from_secs(20), "gave up late: {took:?}");
    let err = stderr(&out);
    assert!(
        err.contains("error: timed out after 2s: default/too-big is still Pending"),
        "{err}"
    );
    assert!(err.contains("ExceedsMaxQuota"), "{err}");
    assert!(err.contains("can get at most 16"), "{err}");

    // -o wide: the extra columns; the pending one shows its place.
    let out = dev.cli(&["get", "workloads", "-o", "wide"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = stdout(&out);
    let header = table.lines().next().unwrap_or_default();
    for column in [
        "PRIORITYCLASS",
        "POSITION",
        "CLUSTER",
        "EPOCH",
        "FLAVORS",
        "REQUESTS",
        "REASON",
    ] {
        assert!(header.contains(column), "no {column} in:\n{table}");
    }
    let too_big: Vec<&str> = table
        .lines()
        .find(|l| l.contains("too-big"))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(too_big.get(7..9), Some(&["Pending", "1"][..]), "{table}");
    assert!(table.contains("nvidia.com/gpu: 100 x 1"), "{table}");
    let narrow = stdout(&dev.cli(&["get", "workloads"]));
    assert!(!narrow.contains("EPOCH"), "{narrow}");
    // JSON is the same whatever the table shows.
    let out = dev.cli(&["get", "workloads", "-o", "fleetq-json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json.as_array().map(Vec::len), Some(4), "{json}");

    let out = dev.cli(&["get", "clusters", "-o", "wide"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = stdout(&out);
    for want in [
        "LEASE-POLICY",
        "LABELS",
        "h100-80gb/nvidia.com/gpu",
        "dev-east",
    ] {
        assert!(table.contains(want), "no {want:?} in:\n{table}");
    }
    let out = dev.cli(&["get", "cq", "-o", "wide"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = stdout(&out);
    for want in ["COHORT", "research", "USAGE/NOMINAL", "BORROWED", "LENT"] {
        assert!(table.contains(want), "no {want:?} in:\n{table}");
    }
    let out = dev.cli(&["status", "-o", "wide"]);
    assert!(
        out.status.success() && stdout(&out).contains("Leader:"),
        "{}",
        text(&out)
    );

    let out = dev.cli(&["cancel", "too-big"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// `submit --wait` whose group goes away stops waiting, saying so and
/// that the workload may still be queued, once no node has answered for
/// `--unreachable-timeout`; it used to ask again for ever.
#[test]
fn a_wait_gives_up_when_the_group_is_gone() {
    let mut dev = Dev::start();
    let mut child = Command::new(FLEETQ)
        .args(["--server", &dev.addr])
        .args([
            "submit",
            "--queue",
            "team-a",
            "--name",
            "stranded",
            "--request",
            "nvidia.com/gpu=100",
            "--wait",
            "--unreachable-timeout",
            "3s",
        ])
        .env("FLEETQ_TLS_DIR", dev.dir.path().join("tls"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fleetq CLI runs");
    // It is waiting (never fits: more than the cohort has).
    let queued = wait_for(Duration::from_secs(20), || {
        stdout(&dev.cli(&["get", "workloads"]))
            .contains("stranded")
            .then_some(())
    });
    assert!(queued.is_some(), "never submitted: {}", dev.log());
    // The whole group goes.
    let _ = dev.child.kill();
    let _ = dev.child.wait();
    let ended = wait_for(Duration::from_secs(60), || {
        child.try_wait().ok().flatten().map(|_| ())
    });
    if ended.is_none() {
        let _ = child.kill();
        let out = child.wait_with_output().expect("the CLI ends");
        panic!("still waiting 60 s after the group went: {}", text(&out));
    }
    let out = child.wait_with_output().expect("the CLI ends");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("error: no node of the group has answered for 3s")
            && err.contains("default/stranded may still be queued"),
        "{err}"
    );
}
