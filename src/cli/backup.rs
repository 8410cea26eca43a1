//! `fleetq backup` and `fleetq restore` (docs/operating.md).
//!
//! ```text
//! fleetq backup --out ledger.fqb                      # through any node, online
//! fleetq backup --from-data-dir /var/lib/fleetq/1 --out survivor.fqb   # a stopped node's data
//! fleetq restore --from ledger.fqb --data-dir /var/lib/fleetq/n1 --id 1 \
//!   --peers 1=10.0.0.1:7400,2=10.0.0.2:7400,3=10.0.0.3:7400  # offline, once per new node
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fleetq_ledger::backup::{self, Backup};
use fleetq_proto::v1 as pb;
use serde::Serialize;

use super::client;
use super::view::Output;

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The backup file to write (written whole, synced, then renamed into
    /// place).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Back up the data directory of a stopped node instead of asking a
    /// server: its snapshot with its whole log applied, committed or not.
    /// For recovery from a lost quorum (docs/operating.md).
    #[arg(long, value_name = "DIR")]
    pub from_data_dir: Option<PathBuf>,
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (`fleetq backup --out`).
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The new node's data directory; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The new node's id (its `fleetq server --id`).
    #[arg(long)]
    pub id: u64,
    /// The new group's voters, ID=ADDR,... (this node included), as the
    /// new nodes' `fleetq server --peers` will say. Default: the backup's
    /// own voters.
    #[arg(long, value_delimiter = ',', value_name = "ID=ADDR")]
    pub peers: Vec<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// What `backup` and `restore` print with `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    file: String,
    format: u32,
    index: u64,
    term: u64,
    state_hash: String,
    checksum: String,
    bytes: u64,
    taken_at_ms: u64,
    source: String,
    /// The voters when the backup was taken.
    voters: BTreeMap<u64, String>,
    /// restore: the data directory written, and the new group.
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    members: Option<BTreeMap<u64, String>>,
}

fn summary(file: &str, b: &Backup, file_bytes: u64) -> Summary {
    Summary {
        file: file.to_string(),
        format: b.header.format,
        index: b.header.index,
        term: b.header.term,
        state_hash: b.header.state_hash.clone(),
        checksum: b.header.checksum.clone(),
        bytes: file_bytes,
        taken_at_ms: b.header.taken_at_ms,
        source: b.header.source.clone(),
        voters: b.voters(),
        data_dir: None,
        node_id: None,
        members: None,
    }
}

fn print(summary: &Summary, output: Output, table: impl FnOnce(&Summary)) {
    match output {
        Output::Json | Output::FleetqJson => println!(
            "{}",
            serde_json::to_string_pretty(summary).unwrap_or_default()
        ),
        Output::Yaml => print!("{}", serde_norway::to_string(summary).unwrap_or_default()),
        Output::Table | Output::Wide => table(summary),
    }
}

/// The backup file's bytes from the server, streamed.
async fn fetch(server: &str) -> Result<Vec<u8>, String> {
    let mut c = client::connect(server).await?;
    let mut stream = c
        .backup(pb::BackupRequest {})
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream
        .message()
        .await
        .map_err(|s| client::status_line(&s))?
    {
        if chunk.total_bytes > 0 {
            bytes.reserve(chunk.total_bytes as usize);
        }
        bytes.extend_from_slice(&chunk.data);
    }
    Ok(bytes)
}

pub fn run_backup(server: &str, args: &BackupArgs) -> ExitCode {
    let out = args.out.display().to_string();
    let result = client::block_on(async {
        let bytes = match &args.from_data_dir {
            Some(dir) => backup::from_data_dir(dir).await?.encode()?,
            None => fetch(server).await?,
        };
        // Checked before it is written: a file that reaches the disk reads back.
        let b = Backup::decode(&bytes, &format!("the backup from {server}"))?;
        b.ledger(fleetq_scheduler::SchedulerConfig::default())?;
        backup::write_durably(&args.out, &bytes)?;
        Ok::<_, String>(summary(&out, &b, bytes.len() as u64))
    })
    .and_then(|r| r);
    match result {
        Ok(s) => {
            print(&s, args.output, |s| {
                println!(
                    "backup {}: index {}, term {}, {} bytes, from {}",
                    s.file, s.index, s.term, s.bytes, s.source
                );
                println!("state hash {}", s.state_hash);
                println!("checksum   {}", s.checksum);
            });
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: backup to {out}: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn run_restore(args: &RestoreArgs) -> ExitCode {
    let result = (|| {
        let b = Backup::read_file(&args.from)?;
        let members = if args.peers.is_empty() {
            b.voters()
        } else {
            super::server::parse_peers(&args.peers)?
        };
        if args.id == 0 {
            return Err("--id: node ids start at 1".to_string());
        }
        client::block_on(backup::restore(&b, &args.data_dir, args.id, &members))??;
        let bytes = std::fs::metadata(&args.from).map(|m| m.len()).unwrap_or(0);
        let mut s = summary(&args.from.display().to_string(), &b, bytes);
        s.data_dir = Some(args.data_dir.display().to_string());
        s.node_id = Some(args.id);
        s.members = Some(members);
        Ok(s)
    })();
    match result {
        Ok(s) => {
            print(&s, args.output, |s| {
                let members = s.members.clone().unwrap_or_default();
                let peers: Vec<String> =
                    members.iter().map(|(id, a)| format!("{id}={a}")).collect();
                println!(
                    "restored {} (index {}, term {}, state hash {}) into {} for node {}",
                    s.file,
                    s.index,
                    s.term,
                    s.state_hash,
                    s.data_dir.as_deref().unwrap_or_default(),
                    args.id
                );
                println!(
                    "start it with: fleetq server --id {} --data-dir {} --peers {}",
                    args.id,
                    s.data_dir.as_deref().unwrap_or_default(),
                    peers.join(",")
                );
            });
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: restore from {}: {e}", args.from.display());
            ExitCode::FAILURE
        }
    }
}
