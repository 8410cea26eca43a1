//! `fleetq top`: a live view of the ClusterQueues and clusters, redrawn
//! every second with plain ANSI escapes (no terminal UI library).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use fleetq_model::Quantity;
use fleetq_proto::v1 as pb;

use super::client::{self, Client};
use super::view;

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Time between refreshes, e.g. 1s, 500ms, 2s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Print one frame and exit (for scripts).
    #[arg(long)]
    pub once: bool,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = fleetq_model::time::parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) {
        return Err(format!("{text:?} is too short: at least 100ms"));
    }
    Ok(d)
}

/// How long one frame's questions may take before the frame says so.
const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// Alternate screen and hidden cursor while live; restored on exit.
const ENTER: &str = "\x1b[?1049h\x1b[?25l";
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";
/// Cursor home, clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub fn run(server: &str, args: &TopArgs) -> ExitCode {
    let result = client::block_on(async {
        if args.once {
            let mut c = client::connect(server).await?;
            let frame = tokio::time::timeout(FRAME_TIMEOUT, frame(&mut c, server))
                .await
                .map_err(|_| format!("{server} did not answer within {FRAME_TIMEOUT:?}"))??;
            write_out(&frame).map_err(|e| format!("writing to stdout: {e}"))
        } else {
            live(server, args.interval).await
        }
    })
    .and_then(|r| r);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes to stdout; a closed pipe ends the program quietly.
fn write_out(text: &str) -> Result<(), std::io::Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Redraws until Ctrl-C. A server that stops answering shows as an error
/// line in the frame; the view reconnects and carries on.
async fn live(server: &str, interval: Duration) -> Result<(), String> {
    let tty = std::io::stdout().is_terminal();
    let redraw = async {
        let mut c: Option<Client> = None;
        loop {
            let text = match draw(&mut c, server).await {
                Ok(frame) => frame,
                Err(e) => {
                    c = None;
                    format!(
                        "fleetq top  server {server}  {}\n\nerror: {e}\n(retrying every {})\n",
                        clock(),
                        fleetq_model::time::format_duration(interval)
                    )
                }
            };
            let text = if tty {
                format!(
                    "{CLEAR}{text}  every {}, Ctrl-C quits\n",
                    fleetq_model::time::format_duration(interval)
                )
            } else {
                format!("{text}\n")
            };
            write_out(&text).map_err(|e| format!("writing to stdout: {e}"))?;
            tokio::time::sleep(interval).await;
        }
    };
    if tty {
        write_out(ENTER).map_err(|e| format!("writing to stdout: {e}"))?;
    }
    // Both branches are polled at once, so Ctrl-C is caught from the start.
    let result = tokio::select! {
        r = redraw => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    if tty {
        let _ = write_out(LEAVE);
    }
    result
}

/// One frame, connecting first when there is no connection.
async fn draw(c: &mut Option<Client>, server: &str) -> Result<String, String> {
    let work = async {
        if c.is_none() {
            *c = Some(client::connect(server).await?);
        }
        match c.as_mut() {
            Some(client) => frame(client, server).await,
            None => Err("not connected".to_string()),
        }
    };
    tokio::time::timeout(FRAME_TIMEOUT, work)
        .await
        .map_err(|_| format!("{server} did not answer within {FRAME_TIMEOUT:?}"))?
}

/// Wall-clock time of day, UTC.
fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{:02}:{:02}:{:02} UTC",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

/// `usage/nominal` with a ten-cell bar and a percentage, when both parse.
fn gauge(used: &str, total: &str) -> String {
    let (Ok(u), Ok(t)) = (used.parse::<Quantity>(), total.parse::<Quantity>()) else {
        return format!("{used}/{total}");
    };
    if t.is_zero() {
        return format!("{used}/{total}");
    }
    let ratio = u.milli() as f64 / t.milli() as f64;
    let filled = ((ratio * 10.0).round() as usize).min(10);
    format!(
        "{used}/{total} [{}{}] {:.0}%",
        "#".repeat(filled),
        "-".repeat(10 - filled),
        ratio * 100.0
    )
}

fn dash(s: &str) -> String {
    if s.is_empty() || s == "0" {
        "-".into()
    } else {
        s.to_string()
    }
}

/// Asks the server for everything one frame shows and lays it out.
async fn frame(c: &mut Client, server: &str) -> Result<String, String> {
    let status = |s: tonic::Status| client::status_line(&s);
    let node = c
        .node_status(pb::NodeStatusRequest {
            skip_state_hash: true,
        })
        .await
        .map_err(status)?
        .into_inner();
    let names: Vec<String> = c
        .list_objects(pb::ListObjectsRequest {
            kind: "ClusterQueue".into(),
            namespace: String::new(),
        })
        .await
        .map_err(status)?
        .into_inner()
        .objects_json
        .iter()
        .filter_map(|o| serde_json::from_str::<serde_json::Value>(o).ok())
        .filter_map(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
        .collect();
    let mut queues = Vec::new();
    for name in names {
        // A queue deleted between the two calls just drops out.
        if let Ok(q) = c.describe_cluster_queue(pb::ClusterQueueRef { name }).await {
            queues.push(q.into_inner());
        }
    }
    let clusters = c
        .list_clusters(pb::ListClustersRequest {})
        .await
        .map_err(status)?
        .into_inner()
        .clusters;
    let running = c
        .list_workloads(pb::ListWorkloadsRequest {
            namespace: String::new(),
            all_namespaces: true,
            cluster_queue: String::new(),
            state: "Running".into(),
            limit: 0,
            with_spec: false,
            submitted_by: String::new(),
        })
        .await
        .map_err(status)?
        .into_inner()
        .workloads;
    let mut running_on: BTreeMap<&str, u64> = BTreeMap::new();
    for w in &running {
        *running_on.entry(w.cluster.as_str()).or_default() += 1;
    }

    let leader = if node.leader_id == 0 {
        "none (election in progress)".to_string()
    } else if node.leader_addr.is_empty() {
        node.leader_id.to_string()
    } else {
        format!("{} ({})", node.leader_id, node.leader_addr)
    };
    let mut out = format!(
        "fleetq top  server {server} (node {}, {})  leader {leader}  term {}  applied {}  {}\n\n",
        node.node_id,
        node.server_state,
        node.term,
        node.last_applied,
        clock()
    );

    let mut rows = Vec::new();
    for q in &queues {
        let head = vec![
            q.name.clone(),
            dash(&q.cohort),
            q.pending.to_string(),
            q.admitted.to_string(),
        ];
        if q.resources.is_empty() {
            let mut row = head;
            row.extend(["-", "-", "-", "-", "-"].map(String::from));
            rows.push(row);
            continue;
        }
        for (i, r) in q.resources.iter().enumerate() {
            let mut row = if i == 0 {
                head.clone()
            } else {
                vec![String::new(); 4]
            };
            row.extend([
                r.flavor.clone(),
                r.resource.clone(),
                gauge(&r.usage, &r.nominal),
                dash(&r.borrowed),
                dash(&r.lent),
            ]);
            rows.push(row);
        }
    }
    if rows.is_empty() {
        out.push_str("No ClusterQueues.\n");
    } else {
        out.push_str(&view::format_table(
            &[
                "CLUSTERQUEUE",
                "COHORT",
                "PENDING",
                "ADMITTED",
                "FLAVOR",
                "RESOURCE",
                "USAGE/NOMINAL",
                "BORROWED",
                "LENT",
            ],
            &rows,
        ));
    }
    out.push('\n');

    let mut rows = Vec::new();
    for cl in &clusters {
        let head = vec![
            cl.name.clone(),
            cl.state.clone(),
            running_on
                .get(cl.name.as_str())
                .copied()
                .unwrap_or(0)
                .to_string(),
            cl.workloads.to_string(),
        ];
        if cl.capacity.is_empty() {
            let mut row = head;
            row.extend(["-", "-", "-"].map(String::from));
            rows.push(row);
            continue;
        }
        for (i, f) in cl.capacity.iter().enumerate() {
            let mut row = if i == 0 {
                head.clone()
            } else {
                vec![String::new(); 4]
            };
            row.extend([
                f.flavor.clone(),
                f.resource.clone(),
                gauge(&f.assigned, &f.capacity),
            ]);
            rows.push(row);
        }
    }
    if rows.is_empty() {
        out.push_str("No clusters registered.\n");
    } else {
        out.push_str(&view::format_table(
            &[
                "CLUSTER",
                "STATE",
                "RUNNING",
                "ADMITTED",
                "FLAVOR",
                "RESOURCE",
                "ASSIGNED/CAPACITY",
            ],
            &rows,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_draws_a_bar_and_caps_it_when_borrowing() {
        assert_eq!(gauge("4", "8"), "4/8 [#####-----] 50%");
        assert_eq!(gauge("12", "8"), "12/8 [##########] 150%");
        assert_eq!(gauge("0", "0"), "0/0");
        assert_eq!(gauge("x", "8"), "x/8");
    }

    #[test]
    fn interval_must_be_sane() {
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_interval("10ms").is_err());
        assert!(parse_interval("soon").is_err());
    }
}
