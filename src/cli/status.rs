//! `fleetq status`: the Raft group as the answering node sees it.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client;
use super::view::{self, Output};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(server: &str, args: &StatusArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        c.node_status(pb::NodeStatusRequest::default())
            .await
            .map(|r| r.into_inner())
            .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(s) => {
            if args.output.is_table() {
                println!("Node:          {} ({})", s.node_id, s.server_state);
                println!("Leader:        {} {}", s.leader_id, s.leader_addr);
                println!("Term:          {}", s.term);
                println!(
                    "Applied:       {} (log {}, snapshot {}, purged {})",
                    s.last_applied, s.last_log_index, s.snapshot_index, s.purged_index
                );
                println!("State hash:    {}", s.state_hash);
                let scheduling: serde_json::Value =
                    serde_json::from_str(&s.scheduling_json).unwrap_or_default();
                let fair = &scheduling["fairSharing"];
                if fair["enable"].as_bool().unwrap_or(false) {
                    let strategies: Vec<&str> = fair["preemptionStrategies"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str())
                        .collect();
                    println!(
                        "Fair sharing:  on, preemption strategies {} (from the {})",
                        strategies.join(", "),
                        fair["from"].as_str().unwrap_or("server settings")
                    );
                } else {
                    println!(
                        "Fair sharing:  off (from the {}; apply a Kueue Configuration with fairSharing.enable: true to turn it on)",
                        fair["from"].as_str().unwrap_or("server settings")
                    );
                }
                println!(
                    "Admission fair sharing: {}",
                    admission_fair_sharing(&scheduling)
                );
                let mut voters: Vec<_> = s.voters.iter().collect();
                voters.sort();
                for (id, addr) in voters {
                    println!("Voter:         {id} {addr}");
                }
                let mut learners: Vec<_> = s.learners.iter().collect();
                learners.sort();
                for (id, addr) in learners {
                    println!("Learner:       {id} {addr}");
                }
                println!("Counters:      {}", s.counters_json);
            } else {
                let counters: serde_json::Value =
                    serde_json::from_str(&s.counters_json).unwrap_or_default();
                let value = serde_json::json!({
                    "nodeId": s.node_id, "state": s.server_state, "leaderId": s.leader_id,
                    "leaderAddr": s.leader_addr, "term": s.term, "lastApplied": s.last_applied,
                    "lastLogIndex": s.last_log_index, "snapshotIndex": s.snapshot_index,
                    "purgedIndex": s.purged_index, "stateHash": s.state_hash,
                    "voters": s.voters, "learners": s.learners, "counters": counters,
                    "scheduling": serde_json::from_str::<serde_json::Value>(&s.scheduling_json).unwrap_or_default(),
                });
                if let Err(e) = view::print_structured(&value, args.output) {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `status`'s line on admission fair sharing: which ClusterQueues use it,
/// the usage half-life and what the usage counts.
fn admission_fair_sharing(scheduling: &serde_json::Value) -> String {
    let afs = &scheduling["admissionFairSharing"];
    let queues = afs["clusterQueues"].as_u64().unwrap_or(0);
    let half_life = afs["usageHalfLifeTime"].as_str().unwrap_or("?");
    let weights: Vec<String> = afs["resourceWeightsMilli"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(r, w)| Some(format!("{r}={}", w.as_u64()? as f64 / 1000.0)))
        .collect();
    let counts = if weights.is_empty() {
        "GPU time".to_string()
    } else {
        format!("weighted {}", weights.join(", "))
    };
    let used_by = match queues {
        0 => {
            "no ClusterQueue uses it (a ClusterQueue turns it on with admissionScope.admissionMode: UsageBasedAdmissionFairSharing)"
                .to_string()
        }
        n => format!("{n} ClusterQueue(s)"),
    };
    format!("{used_by}; usage half-life {half_life}, counts {counts}")
}

#[cfg(test)]
mod tests {
    use super::admission_fair_sharing;

    #[test]
    fn admission_fair_sharing_line_says_who_uses_it_and_what_it_counts() {
        let off = serde_json::json!({"admissionFairSharing": {
            "usageHalfLifeTime": "1h", "resourceWeightsMilli": {}, "clusterQueues": 0}});
        let line = admission_fair_sharing(&off);
        assert!(line.starts_with("no ClusterQueue uses it"), "{line}");
        assert!(
            line.ends_with("usage half-life 1h, counts GPU time"),
            "{line}"
        );
        let on = serde_json::json!({"admissionFairSharing": {
            "usageHalfLifeTime": "7d",
            "resourceWeightsMilli": {"cpu": 500, "nvidia.com/gpu": 1000},
            "clusterQueues": 2}});
        assert_eq!(
            admission_fair_sharing(&on),
            "2 ClusterQueue(s); usage half-life 7d, counts weighted cpu=0.5, nvidia.com/gpu=1"
        );
    }
}
