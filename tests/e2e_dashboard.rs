//! The web dashboard (`/ui`) in a real browser: a scripted `fleetq dev`
//! run (workloads running on both clusters, MIG slices in use, team-a
//! borrowing from team-b, two workloads pending for different reasons)
//! rendered by headless Chromium, whose DOM must show what the CLI reports:
//! the clusters with their GPUs, MIG slices and workloads, the
//! ClusterQueues' usage, borrowing and lending, the cohort, the pending
//! workloads with their reasons, the recent events and the Raft leader.
//! It also takes a screenshot (`FLEETQ_UPDATE_SCREENSHOT=1` writes it to
//! `docs/dashboard.png`, the README's).
//!
//! Needs Debian's `chromium` (`apt-get install -y chromium`; `.ci/run`
//! installs it). Without it the test fails, unless
//! `FLEETQ_SKIP_BROWSER_TESTS=1`, which skips it. `FLEETQ_CHROMIUM` names
//! another binary.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cli_tls, text, wait_for, Logged as Dev, FLEETQ};
use serde_json::Value;

/// The browser, or why the test cannot run.
fn chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("FLEETQ_CHROMIUM") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(
        "headless Chromium is needed for the dashboard test but `chromium` is not on PATH: \
         install it with `apt-get install -y chromium` (Debian's package; .ci/run does this), \
         point FLEETQ_CHROMIUM at a Chromium binary, or set FLEETQ_SKIP_BROWSER_TESTS=1 to skip \
         browser tests"
            .into(),
    )
}

/// Three consecutive free ports from 12000-19999: below Linux's ephemeral
/// range and the ports e2e_metrics draws from (20000-32000).
fn three_free_ports(avoid: &[u16]) -> u16 {
    common::consecutive_free_ports(12_000, 7_990, 3, avoid)
}

/// GET over plain HTTP/1.1: (status code, head, body).
fn http_get(addr: &str, path: &str) -> Option<(u16, String, String)> {
    common::http(addr, "GET", path, Duration::from_secs(5)).map(|r| (r.status, r.head, r.body))
}

/// `tls`: the certificate directory of `fleetq dev --tls-dir` (the CLI's
/// FLEETQ_TLS_DIR), here and below.
fn submit(addr: &str, tls: &Path, args: &[&str]) {
    let out = cli_tls(addr, tls, &[&["submit"], args].concat());
    assert!(out.status.success(), "submit {args:?}: {}", text(&out));
}

fn json(addr: &str, tls: &Path, args: &[&str]) -> Value {
    let out = cli_tls(addr, tls, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out)))
}

fn workloads(addr: &str, tls: &Path) -> Vec<Value> {
    json(addr, tls, &["get", "workloads", "-o", "fleetq-json"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn field<'a>(list: &'a [Value], name: &str, key: &str) -> &'a str {
    list.iter()
        .find(|w| w["name"] == name)
        .and_then(|w| w[key].as_str())
        .unwrap_or("")
}

/// Runs Chromium headless on `url` with `extra` flags, at most 90 s.
fn run_chromium(browser: &Path, profile: &Path, url: &str, extra: &[&str]) -> Output {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    // Drain the pipes while waiting, so a chatty browser cannot block.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let status = child.wait().expect("wait for chromium");
            let err = err_reader.join().unwrap_or_default();
            panic!(
                "chromium did not finish within 90 s ({status}): {}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// One start tag of the dumped DOM: its name, attributes and offset.
#[derive(Debug)]
struct Tag {
    name: String,
    attrs: BTreeMap<String, String>,
    at: usize,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).map(String::as_str)
    }
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The start tags of serialised HTML (quoted attribute values may hold
/// `>`; script and style bodies are skipped), and its text.
fn parse_dom(html: &str) -> (Vec<Tag>, String) {
    let bytes = html.as_bytes();
    let mut tags = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            let end = html[i..].find('<').map_or(bytes.len(), |n| i + n);
            text.push_str(&unescape(&html[i..end]));
            i = end;
            continue;
        }
        let at = i;
        i += 1;
        if html[i..].starts_with("!--") {
            i = html[i..].find("-->").map_or(bytes.len(), |n| i + n + 3);
            continue;
        }
        if bytes.get(i) == Some(&b'/') || bytes.get(i) == Some(&b'!') {
            i = html[i..].find('>').map_or(bytes.len(), |n| i + n + 1);
            text.push(' ');
            continue;
        }
        let name_end = html[i..]
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .map_or(bytes.len(), |n| i + n);
        let name = html[i..name_end].to_ascii_lowercase();
        i = name_end;
        let mut attrs = BTreeMap::new();
        loop {
            while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
                i += 1;
            }
            if i >= bytes.len() || bytes[i] == b'>' {
                i += 1;
                break;
            }
            let key_end = html[i..]
                .find(|c: char| c.is_whitespace() || c == '=' || c == '>')
                .map_or(bytes.len(), |n| i + n);
            let key = html[i..key_end].to_ascii_lowercase();
            i = key_end;
            let mut value = String::new();
            if bytes.get(i) == Some(&b'=') {
                i += 1;
                let quote = bytes.get(i).copied();
                if quote == Some(b'"') || quote == Some(b'\'') {
                    let q = quote.map(char::from).unwrap_or('"');
                    let end = html[i + 1..].find(q).map_or(bytes.len(), |n| i + 1 + n);
                    value = unescape(&html[i + 1..end]);
                    i = end + 1;
                } else {
                    let end = html[i..]
                        .find(|c: char| c.is_whitespace() || c == '>')
                        .map_or(bytes.len(), |n| i + n);
                    value = unescape(&html[i..end]);
                    i = end;
                }
            }
            attrs.insert(key, value);
        }
        if name == "script" || name == "style" {
            let close = format!("</{name}");
            i = html[i..].find(&close).map_or(bytes.len(), |n| i + n);
        }
        tags.push(Tag { name, attrs, at });
    }
    (tags, text)
}

/// The tags carrying `attr` = `value`.
fn with<'a>(tags: &'a [Tag], attr: &str, value: &str) -> Vec<&'a Tag> {
    tags.iter()
        .filter(|t| t.attr(attr) == Some(value))
        .collect()
}

fn number(t: &Tag, attr: &str) -> f64 {
    t.attr(attr)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{attr} of {t:?}"))
}

fn units(q: &str) -> f64 {
    q.parse()
        .unwrap_or_else(|_| panic!("unexpected quantity {q:?}"))
}

#[test]
fn dashboard_shows_the_fleet_in_headless_chromium() {
    let browser = match chromium() {
        Ok(b) => b,
        Err(why) => {
            if std::env::var("FLEETQ_SKIP_BROWSER_TESTS").as_deref() == Ok("1") {
                eprintln!("skipped (FLEETQ_SKIP_BROWSER_TESTS=1): {why}");
                return;
            }
            panic!("{why}");
        }
    };

    let port = three_free_ports(&[]);
    let http_port = three_free_ports(&[port]);
    let addr = format!("127.0.0.1:{port}");
    let http = format!("127.0.0.1:{http_port}");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("dev.log");
    let out = std::fs::File::create(&log).expect("log");
    // Mutual TLS with certificates dev makes in the test's directory.
    let tls = dir.path().join("tls");
    let child = Command::new(FLEETQ)
        .args(["dev", "--port", &port.to_string()])
        .args(["--http-listen", &http])
        .arg("--tls-dir")
        .arg(&tls)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("fleetq dev starts");
    let dev = Dev::new(child, log, dir);
    wait_for(Duration::from_secs(30), || {
        let log = dev.log();
        log.contains("fleetq dev is running").then_some(())
    })
    .unwrap_or_else(|| panic!("fleetq dev did not start: {}", dev.log()));
    assert!(
        dev.log().contains(&format!("dashboard: http://{http}/ui")),
        "the startup lines name the dashboard:\n{}",
        dev.log()
    );

    // The page and its feed over plain HTTP.
    let (status, head, page) = http_get(&http, "/ui").expect("/ui answers");
    assert_eq!(status, 200, "/ui: {head}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(page.contains("<title>fleetq dashboard</title>"), "{page}");
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the page loads nothing from elsewhere"
    );
    let (status, head, body) = http_get(&http, "/api/v1/overview").expect("overview answers");
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let overview: Value = serde_json::from_str(&body).expect("overview is JSON");
    assert_eq!(overview["raft"]["nodeId"], 1, "{overview}");

    // A finished workload. Then team-a borrows 4 GPUs from team-b (a1 and
    // a2 fill dev-east, a3 goes to dev-west: one at a time, so placement
    // is fixed), team-b runs b1 and uses MIG slices; b2 (high priority,
    // 3 pods of 2 GPUs) reclaims team-b's quota by preempting a3, runs 3 s, and a3
    // comes back. Then a4 waits for quota and a5 fits no cluster.
    let run = |queue: &str, name: &str, request: &str, duration: &str, class: Option<&str>| {
        let mut args = vec![
            "--queue",
            queue,
            "--name",
            name,
            "--request",
            request,
            "--duration",
            duration,
        ];
        if let Some(c) = class {
            args.extend(["--priority-class", c]);
        }
        args.extend(["--wait", "--timeout", "30s"]);
        submit(&addr, &tls, &args);
    };
    run("team-a", "quick", "nvidia.com/gpu=1", "1s", None);
    wait_for(Duration::from_secs(30), || {
        (field(&workloads(&addr, &tls), "quick", "state") == "Succeeded").then_some(())
    })
    .unwrap_or_else(|| panic!("quick did not finish: {:?}", workloads(&addr, &tls)));
    for name in ["a1", "a2", "a3"] {
        run("team-a", name, "nvidia.com/gpu=4", "10m", Some("low"));
    }
    run("team-b", "b1", "nvidia.com/gpu=2", "10m", None);
    run("team-b", "mig1", "nvidia.com/mig-1g.10gb=3", "10m", None);
    // Three pods of 2 GPUs: the dev clusters' nodes have 4 GPUs each, so
    // a 6-GPU pod would fit no node.
    submit(
        &addr,
        &tls,
        &[
            "--queue",
            "team-b",
            "--name",
            "b2",
            "--request",
            "nvidia.com/gpu=2",
            "--count",
            "3",
            "--duration",
            "3s",
            "--priority-class",
            "high",
            "--wait",
            "--timeout",
            "30s",
        ],
    );
    let running = ["a1", "a2", "a3", "b1", "mig1"];
    wait_for(Duration::from_secs(30), || {
        let list = workloads(&addr, &tls);
        let settled = field(&list, "b2", "state") == "Succeeded"
            && running
                .iter()
                .all(|n| field(&list, n, "state") == "Running");
        settled.then_some(())
    })
    .unwrap_or_else(|| panic!("b2 did not run and finish: {:?}", workloads(&addr, &tls)));
    for (name, gpus) in [("a4", "nvidia.com/gpu=8"), ("a5", "nvidia.com/gpu=16")] {
        submit(
            &addr,
            &tls,
            &["--queue", "team-a", "--name", name, "--request", gpus],
        );
    }
    let list = wait_for(Duration::from_secs(30), || {
        let list = workloads(&addr, &tls);
        let settled = field(&list, "a4", "reasonKind") == "WaitingForQuota"
            && field(&list, "a5", "reasonKind") == "NoClusterCapacity";
        settled.then_some(list)
    })
    .unwrap_or_else(|| {
        panic!(
            "a4 and a5 did not get their reasons: {:?}",
            workloads(&addr, &tls)
        )
    });
    let clusters = json(&addr, &tls, &["get", "clusters", "-o", "json"]);
    let status = json(&addr, &tls, &["status", "-o", "json"]);
    let leader = status["leaderId"].as_u64().expect("a leader");

    // Render it.
    let profile = tempfile::tempdir().expect("profile dir");
    let url = format!("http://{http}/ui");
    let out = run_chromium(&browser, profile.path(), &url, &["--dump-dom"]);
    assert!(
        out.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let (tags, page_text) = parse_dom(&dom);
    let dump = || format!("DOM:\n{dom}");

    // Live: the page polled more than once (every second of the 8 s of
    // virtual time it was given).
    let body = tags.iter().find(|t| t.name == "body").expect("a body");
    assert!(
        number(body, "data-polls") >= 2.0,
        "the page did not keep polling: {body:?}\n{}",
        dump()
    );
    assert!(page_text.contains("live"), "{}", dump());

    // Raft: the leader the CLI reports.
    let leader_tag = tags
        .iter()
        .find(|t| t.attr("id") == Some("raft-leader"))
        .unwrap_or_else(|| panic!("no Raft leader shown\n{}", dump()));
    assert_eq!(
        leader_tag.attr("data-leader"),
        Some(leader.to_string().as_str()),
        "{}",
        dump()
    );
    assert!(page_text.contains(&format!("node {leader}")), "{}", dump());
    let members = tags.iter().filter(|t| t.attrs.contains_key("data-member"));
    assert_eq!(members.count(), 3, "three Raft members\n{}", dump());
    assert_eq!(
        with(&tags, "data-role", "leader")
            .first()
            .and_then(|t| t.attr("data-member")),
        Some(leader.to_string().as_str())
    );

    // Clusters: state, capacity and assigned as `get clusters` says,
    // the MIG slices, and each running workload under its cluster.
    let cluster_tags: Vec<&Tag> = tags
        .iter()
        .filter(|t| t.attrs.contains_key("data-cluster"))
        .collect();
    assert_eq!(cluster_tags.len(), 2, "{}", dump());
    let cq_section = tags
        .iter()
        .find(|t| t.attr("id") == Some("cq-section"))
        .map_or(dom.len(), |t| t.at);
    for (i, c) in cluster_tags.iter().enumerate() {
        let name = c.attr("data-cluster").unwrap_or_default();
        assert_eq!(c.attr("data-state"), Some("Ready"), "{name}\n{}", dump());
        let end = cluster_tags.get(i + 1).map_or(cq_section, |n| n.at);
        let inside: Vec<&Tag> = tags.iter().filter(|t| t.at > c.at && t.at < end).collect();
        let want = clusters
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == name))
            .unwrap_or_else(|| panic!("the CLI knows no cluster {name}: {clusters}"));
        for f in want["capacity"].as_array().into_iter().flatten() {
            let cell = format!(
                "{}/{}",
                f["flavor"].as_str().unwrap_or_default(),
                f["resource"].as_str().unwrap_or_default()
            );
            let shown = inside
                .iter()
                .find(|t| t.attr("data-cell") == Some(cell.as_str()))
                .unwrap_or_else(|| panic!("{name}: no {cell}\n{}", dump()));
            assert_eq!(
                number(shown, "data-capacity"),
                units(f["capacity"].as_str().unwrap_or("?")),
                "{name} {cell}"
            );
            assert_eq!(
                number(shown, "data-assigned"),
                units(f["assigned"].as_str().unwrap_or("?")),
                "{name} {cell}"
            );
            if cell.ends_with("nvidia.com/mig-1g.10gb") {
                assert_eq!(shown.attr("data-mig"), Some("1g.10gb"), "{name}");
            }
        }
        for w in &running {
            let here = field(&list, w, "cluster") == name;
            let shown = inside
                .iter()
                .any(|t| t.attr("data-workload") == Some(format!("default/{w}").as_str()));
            assert_eq!(
                shown,
                here,
                "{w} on {name}: the CLI says {:?}\n{}",
                field(&list, w, "cluster"),
                dump()
            );
        }
    }
    assert!(page_text.contains("MIG 1g.10gb"), "{}", dump());

    // ClusterQueues: usage, borrowing and lending per flavor.
    let quota = |cq: &str, cell: &str| -> (f64, f64, f64, f64) {
        let t = tags
            .iter()
            .find(|t| {
                t.attr("class") == Some("quota")
                    && t.attr("data-cq") == Some(cq)
                    && t.attr("data-cell") == Some(cell)
            })
            .unwrap_or_else(|| panic!("no quota bar for {cq} {cell}\n{}", dump()));
        (
            number(t, "data-nominal"),
            number(t, "data-usage"),
            number(t, "data-borrowed"),
            number(t, "data-lent"),
        )
    };
    let gpu = "h100-80gb/nvidia.com/gpu";
    let mig = "h100-80gb/nvidia.com/mig-1g.10gb";
    assert_eq!(quota("team-a", gpu), (8.0, 12.0, 4.0, 0.0));
    assert_eq!(quota("team-b", gpu), (8.0, 2.0, 0.0, 4.0));
    assert_eq!(quota("team-b", mig), (7.0, 3.0, 0.0, 0.0));
    assert!(page_text.contains("12 / 8 used · 4 borrowed"), "{}", dump());
    assert!(page_text.contains("2 / 8 used · 4 lent"), "{}", dump());
    let row = |cq: &str| {
        tags.iter()
            .find(|t| {
                t.name == "tr"
                    && t.attr("data-cq") == Some(cq)
                    && t.attrs.contains_key("data-admitted")
            })
            .unwrap_or_else(|| panic!("no row for ClusterQueue {cq}\n{}", dump()))
    };
    assert_eq!(row("team-a").attr("data-cohort"), Some("research"));
    assert_eq!(number(row("team-a"), "data-admitted"), 3.0);
    assert_eq!(number(row("team-a"), "data-pending"), 2.0);
    assert_eq!(number(row("team-b"), "data-admitted"), 2.0);
    let cohort = with(&tags, "data-cohort-row", "research");
    assert_eq!(cohort.len(), 1, "the cohort is shown\n{}", dump());

    // Pending workloads with the reasons the CLI gives.
    for w in ["a4", "a5"] {
        let key = format!("default/{w}");
        let t = with(&tags, "data-pending", &key);
        let t = t
            .first()
            .unwrap_or_else(|| panic!("{key} is not listed as pending\n{}", dump()));
        assert_eq!(
            t.attr("data-reason-kind"),
            Some(field(&list, w, "reasonKind")),
            "{key}"
        );
        let reason = field(&list, w, "reason");
        assert!(!reason.is_empty());
        assert!(
            page_text.contains(reason),
            "{key}: the reason {reason:?} is not shown\n{}",
            dump()
        );
    }
    for w in running {
        assert!(
            with(&tags, "data-pending", &format!("default/{w}")).is_empty(),
            "{w} runs, it is not pending"
        );
    }

    // Recent events: the admissions and the finished workload.
    let event = |kind: &str, w: &str| {
        tags.iter().any(|t| {
            t.attr("data-event") == Some(kind)
                && t.attr("data-workload") == Some(format!("default/{w}").as_str())
        })
    };
    for w in ["a1", "a2", "a3", "b1", "mig1", "b2", "quick"] {
        assert!(event("Admitted", w), "no admission of {w}\n{}", dump());
    }
    assert!(event("Succeeded", "quick"), "{}", dump());
    assert!(event("Succeeded", "b2"), "{}", dump());
    // b2 could only fit on dev-west by preempting a3 there.
    assert!(event("Preempted", "a3"), "{}", dump());
    assert!(event("Requeued", "a3"), "{}", dump());
    assert!(page_text.contains("to admit workload"), "{}", dump());

    // A screenshot: a PNG of the window's size.
    let shot_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let shot = shot_dir.join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let out = run_chromium(
        &browser,
        profile.path(),
        &url,
        &[
            "--window-size=1400,1000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert_eq!((width, height), (1400, 1000));
    if std::env::var("FLEETQ_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        std::fs::create_dir_all(&docs).expect("docs/");
        std::fs::write(docs.join("dashboard.png"), &png).expect("docs/dashboard.png");
        eprintln!("wrote {}", docs.join("dashboard.png").display());
    } else {
        eprintln!("screenshot: {}", shot.display());
    }
}
