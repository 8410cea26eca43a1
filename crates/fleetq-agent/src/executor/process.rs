//! The process executor: each admitted workload runs as a real child
//! process in its own process group, with `CUDA_VISIBLE_DEVICES` set to
//! exactly the device or MIG UUIDs allocated to it, its output in
//! `<state_dir>/logs/<id>-<epoch>.log`. Exit 0 is Succeeded, anything else
//! Failed. A stop sends SIGTERM to the group, then SIGKILL after the grace
//! period.
//!
//! Children outlive the agent. Each start writes
//! `<state_dir>/running/<id>-<epoch>.json` (pid, the process's start time
//! from /proc, epoch, devices); the command runs under `sh -c`, which writes
//! its exit code to `<id>-<epoch>.exit`. A restarted agent re-adopts every
//! child that still runs (same pid *and* start time, so a reused pid is not
//! mistaken for it) and reports the others with the exit code they left.
//!
//! `<state_dir>/journal.jsonl` is the executor's own account, one JSON
//! line per fact with the wall-clock time it was observed: `started`
//! (the child was spawned), `exited` (it ended by itself, with its code)
//! and `stopped` (it was stopped and its whole group is gone). Operators
//! read it to audit what ran where and when; the end-to-end tests read it
//! to prove that no admission ran on two clusters at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fleetq_model::Workload;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::run_as::{RunAs, ENV, SETPRIV, WORKLOAD_PATH};
pub use super::JournalEntry;
use super::{Event, Report};
use crate::inventory::devices::{DevicePool, DeviceSlot};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RunRecord {
    workload: u64,
    epoch: u64,
    pid: u32,
    /// /proc/<pid>/stat field 22: tells a reused pid from ours.
    start_ticks: u64,
    devices: Vec<String>,
}

pub struct ProcessExecutor {
    state_dir: PathBuf,
    /// Who workloads run as (crate::executor::run_as).
    run_as: RunAs,
    pool: DevicePool,
    events: mpsc::UnboundedSender<Report>,
    running: HashMap<(u64, u64), (RunRecord, JoinHandle<()>)>,
    /// Admissions being stopped whose processes are not gone yet: a
    /// reconcile reports them as running, so their quota stays held.
    stopping: Arc<Mutex<HashSet<(u64, u64)>>>,
}

/// The start time of a live process (a zombie counts as gone: its
/// orphaned children may never be reaped where PID 1 does not reap).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Appends one entry; a journal that cannot be written is logged, never
/// fatal (the ledger, not the journal, is the record of truth).
fn journal(state_dir: &Path, record: &RunRecord, event: &str, detail: String) {
    let entry = JournalEntry {
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        workload: record.workload,
        epoch: record.epoch,
        event: event.to_string(),
        pid: record.pid,
        detail,
    };
    let path = state_dir.join("journal.jsonl");
    let written = serde_json::to_string(&entry)
        .map_err(std::io::Error::other)
        .and_then(|mut line| {
            line.push('\n');
            // One write(2) per line on an O_APPEND file: lines never interleave.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?
                .write_all(line.as_bytes())
        });
    if let Err(e) = written {
        tracing::warn!(file = %path.display(), error = %e, "cannot write the executor journal");
    }
}

/// Reads a journal back (for audits and tests); unreadable lines are skipped.
pub fn read_journal(state_dir: &Path) -> Vec<JournalEntry> {
    std::fs::read_to_string(state_dir.join("journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `<state_dir>/running/<id>-<epoch>.json`: the run record.
fn record_path(state_dir: &Path, workload: u64, epoch: u64) -> PathBuf {
    state_dir
        .join("running")
        .join(format!("{workload}-{epoch}.json"))
}

/// `<state_dir>/running/<id>-<epoch>.exit`: the exit code `sh` leaves.
fn exit_path(state_dir: &Path, workload: u64, epoch: u64) -> PathBuf {
    state_dir
        .join("running")
        .join(format!("{workload}-{epoch}.exit"))
}

fn alive(record: &RunRecord) -> bool {
    start_ticks(record.pid) == Some(record.start_ticks)
}

fn signal_group(pid: u32, signal: i32) {
    // The child leads its own group (pgid == pid): signal all of it.
    // SAFETY: kill(2) takes plain integers and has no memory effects.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

impl ProcessExecutor {
    /// The end of what an admission printed (`fleetq logs`; epoch 0:
    /// its latest here).
    pub fn logs(&self, workload: u64, epoch: u64, max: u64) -> Result<super::logs::Tail, String> {
        super::logs::read_tail(&self.state_dir.join("logs"), workload, epoch, max)
    }

    /// An executor keeping its state in `state_dir`, allocating devices
    /// from `pool`. Children left by a previous agent are re-adopted or
    /// reported.
    pub fn new(
        state_dir: &Path,
        run_as: RunAs,
        pool: DevicePool,
        events: mpsc::UnboundedSender<Report>,
    ) -> Result<ProcessExecutor, String> {
        for sub in ["running", "logs"] {
            std::fs::create_dir_all(state_dir.join(sub)).map_err(|e| {
                format!(
                    "state_dir {}: cannot create {sub}/: {e}",
                    state_dir.display()
                )
            })?;
        }
        // The agent's own: workloads run as someone else and must not
        // read its records, logs or journal.
        for dir in [
            state_dir.to_path_buf(),
            state_dir.join("running"),
            state_dir.join("logs"),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("state_dir {}: cannot make it private: {e}", dir.display()))?;
        }
        let mut executor = ProcessExecutor {
            state_dir: state_dir.to_path_buf(),
            run_as,
            pool,
            events,
            running: HashMap::new(),
            stopping: Arc::default(),
        };
        executor.adopt();
        Ok(executor)
    }

    /// Re-adopts children from the state directory.
    fn adopt(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.state_dir.join("running")) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Some(record) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<RunRecord>(&b).ok())
            else {
                tracing::warn!(file = %path.display(), "unreadable run record ignored");
                continue;
            };
            self.pool.claim(&record.devices);
            let key = (record.workload, record.epoch);
            let watcher = self.watch_adopted(record.clone());
            tracing::info!(
                workload = record.workload,
                epoch = record.epoch,
                pid = record.pid,
                "re-adopted"
            );
            self.running.insert(key, (record, watcher));
        }
    }

    /// Waits for an adopted child (not ours to wait(2) on) by polling.
    fn watch_adopted(&self, record: RunRecord) -> JoinHandle<()> {
        let events = self.events.clone();
        let state_dir = self.state_dir.clone();
        tokio::spawn(async move {
            while alive(&record) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            finish(&events, &state_dir, &record, None);
        })
    }

    /// Starts an admission; a repeat of a running one is ignored.
    pub fn start(
        &mut self,
        workload: u64,
        epoch: u64,
        spec: &Workload,
        devices_needed: &BTreeMap<(String, String), u64>,
    ) {
        self.reap();
        if self.running.contains_key(&(workload, epoch)) {
            return;
        }
        let report = |event, message: String| Report {
            workload,
            epoch,
            event,
            message,
        };
        let devices = match self.pool.allocate(devices_needed) {
            Ok(d) => d,
            Err(e) => {
                let _ = self.events.send(report(Event::Failed, e));
                return;
            }
        };
        match self.spawn(workload, epoch, spec, &devices) {
            Ok((record, handle)) => {
                let _ = self.events.send(report(Event::Running, String::new()));
                self.running.insert((workload, epoch), (record, handle));
            }
            Err(e) => {
                self.pool
                    .release(&devices.iter().map(|d| d.uuid.clone()).collect::<Vec<_>>());
                let _ = self.events.send(report(Event::Failed, e));
            }
        }
    }

    fn spawn(
        &self,
        workload: u64,
        epoch: u64,
        spec: &Workload,
        devices: &[DeviceSlot],
    ) -> Result<(RunRecord, JoinHandle<()>), String> {
        let command = &spec.spec.run.command;
        if command.is_empty() {
            return Err("the workload has no command to run (run.command)".into());
        }
        let log_path = self
            .state_dir
            .join("logs")
            .join(format!("{workload}-{epoch}.log"));
        if let RunAs::Refuse(why) = &self.run_as {
            return Err(why.clone());
        }
        // The agent's file, 0600: the workload writes it through the
        // descriptors it inherits, and cannot read other workloads' logs.
        let log = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let exit_path = exit_path(&self.state_dir, workload, epoch);
        let uuids: Vec<String> = devices.iter().map(|d| d.uuid.clone()).collect();
        let mut cmd = tokio::process::Command::new("/bin/sh");
        // sh records the exit code where a re-adopting agent can read it,
        // as the agent's user: so sh and everything before the drop run
        // with a fixed environment and absolute paths. The workload's own
        // environment is given only after the drop, by `env -i`: were it
        // set on sh, a tenant's PATH would choose which `setpriv` root
        // runs, and its LD_PRELOAD would load into a root shell.
        let (user, home) = self.run_as.user_and_home();
        let mut argv: Vec<String> = match &self.run_as {
            RunAs::User { uid, gid, .. } => vec![
                SETPRIV.into(),
                format!("--reuid={uid}"),
                format!("--regid={gid}"),
                "--clear-groups".into(),
                "--".into(),
            ],
            _ => Vec::new(),
        };
        argv.extend([ENV.to_string(), "-i".into(), "--".into()]);
        let workload_env = workload_environment(spec, user, home, &uuids, epoch)?;
        argv.extend(workload_env);
        argv.extend(command.iter().cloned());
        cmd.arg("-c")
            .arg("exitf=$1; shift; \"$@\"; code=$?; echo $code > \"$exitf\"; exit $code")
            .arg("fleetq-workload")
            .arg(&exit_path)
            .args(&argv)
            .env_clear()
            .env("PATH", WORKLOAD_PATH)
            // Not the agent's working directory (its state, perhaps).
            .current_dir(if Path::new(home).is_dir() { home } else { "/" })
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .kill_on_drop(false);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", command[0]))?;
        let pid = child
            .id()
            .ok_or("the child exited before it could be recorded")?;
        let record = RunRecord {
            workload,
            epoch,
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            devices: uuids,
        };
        let record_path = record_path(&self.state_dir, workload, epoch);
        let bytes = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        std::fs::write(&record_path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", record_path.display()))?;
        journal(&self.state_dir, &record, "started", String::new());
        let events = self.events.clone();
        let r = record.clone();
        let state_dir = self.state_dir.clone();
        let handle = tokio::spawn(async move {
            let status = child.wait().await.ok().and_then(|s| s.code());
            finish(&events, &state_dir, &r, status);
        });
        Ok((record, handle))
    }

    /// Releases the devices of children that ended.
    fn reap(&mut self) {
        let done: Vec<(u64, u64)> = self
            .running
            .iter()
            .filter(|(_, (_, h))| h.is_finished())
            .map(|(k, _)| *k)
            .collect();
        for key in done {
            if let Some((record, _)) = self.running.remove(&key) {
                self.pool.release(&record.devices);
            }
        }
    }

    /// Stops an admission: SIGTERM to its group, SIGKILL after `grace`.
    /// Stopped is reported once its processes are gone.
    pub fn stop(&mut self, workload: u64, epoch: u64, grace: Duration) {
        self.reap();
        let Some((record, watcher)) = self.running.remove(&(workload, epoch)) else {
            let _ = self.events.send(Report {
                workload,
                epoch,
                event: Event::Stopped,
                message: "not running here".into(),
            });
            return;
        };
        // The watcher would report Failed when the process dies; this stop
        // reports Stopped instead.
        watcher.abort();
        self.pool.release(&record.devices);
        let events = self.events.clone();
        let record_path = record_path(&self.state_dir, workload, epoch);
        let exit_path = exit_path(&self.state_dir, workload, epoch);
        let state_dir = self.state_dir.clone();
        let stopping = self.stopping.clone();
        lock(&stopping).insert((workload, epoch));
        tokio::spawn(async move {
            signal_group(record.pid, libc::SIGTERM);
            let deadline = tokio::time::Instant::now() + grace;
            while alive(&record) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if alive(&record) {
                signal_group(record.pid, libc::SIGKILL);
                while alive(&record) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            journal(&state_dir, &record, "stopped", String::new());
            let _ = std::fs::remove_file(&record_path);
            let _ = std::fs::remove_file(&exit_path);
            lock(&stopping).remove(&(workload, epoch));
            let _ = events.send(Report {
                workload,
                epoch,
                event: Event::Stopped,
                message: String::new(),
            });
        });
    }

    pub fn stop_all(&mut self) -> usize {
        let keys: Vec<(u64, u64)> = self.running.keys().copied().collect();
        for (w, e) in &keys {
            self.stop(*w, *e, Duration::ZERO);
        }
        keys.len()
    }

    /// What runs here, including what is still being stopped.
    pub fn running(&mut self) -> Vec<(u64, u64)> {
        self.reap();
        let mut all: Vec<(u64, u64)> = self.running.keys().copied().collect();
        all.extend(lock(&self.stopping).iter().copied());
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Reports how a child ended and forgets it.
/// The workload's whole environment as `env` operands, in the order
/// `env` applies them (a later name wins): the user's PATH, HOME and
/// USER, then what the spec sets, then fleetq's own, which the spec
/// cannot override. A name `env` would misread (empty, or holding `=`)
/// and a command whose first word holds `=` (`env` would take it for
/// one more variable) are refused.
fn workload_environment(
    spec: &Workload,
    user: &str,
    home: &str,
    devices: &[String],
    epoch: u64,
) -> Result<Vec<String>, String> {
    let run = &spec.spec.run;
    if run.command.first().is_some_and(|c| c.contains('=')) {
        return Err(format!(
            "run.command[0]: {:?} holds '='; name the program by a path without '='",
            run.command[0]
        ));
    }
    let mut out = vec![
        format!("PATH={WORKLOAD_PATH}"),
        format!("HOME={home}"),
        format!("USER={user}"),
    ];
    for (name, value) in &run.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(format!(
                "run.env: {name:?} is not an environment variable name"
            ));
        }
        out.push(format!("{name}={value}"));
    }
    out.push(format!("CUDA_VISIBLE_DEVICES={}", devices.join(",")));
    out.push(format!("FLEETQ_WORKLOAD={}/{}", spec.namespace, spec.name));
    out.push(format!("FLEETQ_EPOCH={epoch}"));
    Ok(out)
}

fn finish(
    events: &mpsc::UnboundedSender<Report>,
    state_dir: &Path,
    record: &RunRecord,
    status: Option<i32>,
) {
    let exit_path = exit_path(state_dir, record.workload, record.epoch);
    let record_path = record_path(state_dir, record.workload, record.epoch);
    let code = status.or_else(|| {
        std::fs::read_to_string(&exit_path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    let (event, message) = match code {
        Some(0) => (Event::Succeeded, "exit 0".to_string()),
        Some(c) => (Event::Failed, format!("exit {c}")),
        None => (
            Event::Failed,
            "ended without an exit code (killed)".to_string(),
        ),
    };
    journal(state_dir, record, "exited", message.clone());
    let _ = std::fs::remove_file(&record_path);
    let _ = std::fs::remove_file(&exit_path);
    let _ = events.send(Report {
        workload: record.workload,
        epoch: record.epoch,
        event,
        message,
    });
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
