//! Named faults for the live harness. Each injects its fault into the
//! running system, holds it, and lifts it; they compose by running one
//! after another under the same load (`--scenario a,b,c`).

use std::time::Duration;

use super::system::{System, LEASE_TTL};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// The leader cut off from the other servers and the agents, both
    /// ways, for two election rounds; then healed.
    LeaderPartition,
    /// kill -9 of the leader, restart from its sled directory 3 s later.
    LeaderKill,
    /// An agent (policy fence) cut off from every server for two leases:
    /// it fences, the leader expires its cluster, work moves; then healed.
    AgentPartition,
    /// kill -9 of an agent (its children live on), restart 2 s later: it
    /// re-adopts or reports them.
    AgentKill,
    /// SIGSTOP of a follower for 3 s, then SIGCONT.
    FollowerPause,
    /// 150 ms added to every chunk on every server link for 5 s.
    SlowNetwork,
    /// 2% of the chunks on every server link lost for 8 s (a connection
    /// that lost one carries nothing more, until keep-alive replaces it).
    LossyNetwork,
    /// Partition sets: the leader and one agent on one side, the other
    /// two servers and the other agent on the other, for two leases:
    /// the majority elects a leader and expires the minority's cluster;
    /// the old leader and its agent are cut off together.
    SplitBrain,
}

pub const ALL: [Scenario; 8] = [
    Scenario::LeaderPartition,
    Scenario::LeaderKill,
    Scenario::AgentPartition,
    Scenario::AgentKill,
    Scenario::FollowerPause,
    Scenario::SlowNetwork,
    Scenario::LossyNetwork,
    Scenario::SplitBrain,
];

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::LeaderPartition => "leader-partition",
            Scenario::LeaderKill => "leader-kill",
            Scenario::AgentPartition => "agent-partition",
            Scenario::AgentKill => "agent-kill",
            Scenario::FollowerPause => "follower-pause",
            Scenario::SlowNetwork => "slow-network",
            Scenario::LossyNetwork => "lossy-network",
            Scenario::SplitBrain => "split-brain",
        }
    }

    /// `a,b,c` into scenarios; an unknown name is an error naming it.
    pub fn parse_list(list: &str) -> Result<Vec<Scenario>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|name| {
                ALL.iter()
                    .copied()
                    .find(|s| s.name() == name)
                    .ok_or_else(|| {
                        let known: Vec<&str> = ALL.iter().map(|s| s.name()).collect();
                        format!(
                            "--scenario: unknown scenario {name:?} (known: {})",
                            known.join(", ")
                        )
                    })
            })
            .collect()
    }

    /// Injects, holds and lifts the fault. Returns how many faults it
    /// injected.
    pub fn run(self, system: &mut System, round: usize) -> Result<usize, String> {
        let leader = || {
            system
                .wait_leader(Duration::from_secs(20))
                .ok_or("no leader to fault within 20 s")
        };
        match self {
            Scenario::LeaderPartition => {
                let l = leader()?;
                system.isolate_server(l);
                std::thread::sleep(Duration::from_secs(5));
                system.heal();
            }
            Scenario::LeaderKill => {
                let l = leader()?;
                system.kill_server(l);
                std::thread::sleep(Duration::from_secs(3));
                system.start_server(l)?;
            }
            Scenario::AgentPartition => {
                let n = round % system.agents.len();
                system.isolate_agent(n);
                std::thread::sleep(LEASE_TTL * 2);
                system.heal();
            }
            Scenario::AgentKill => {
                let n = round % system.agents.len();
                system.kill_agent(n);
                std::thread::sleep(Duration::from_secs(2));
                system.start_agent(n)?;
            }
            Scenario::FollowerPause => {
                let l = leader()?;
                let f = (l + 1 + round % 2) % system.servers.len();
                system.pause_server(f, true);
                std::thread::sleep(Duration::from_secs(3));
                system.pause_server(f, false);
            }
            Scenario::SlowNetwork => {
                system.delay_all(Duration::from_millis(150));
                std::thread::sleep(Duration::from_secs(5));
                system.heal();
            }
            Scenario::LossyNetwork => {
                system.drop_all(20);
                std::thread::sleep(Duration::from_secs(8));
                system.heal();
            }
            Scenario::SplitBrain => {
                let l = leader()?;
                let n = round % system.agents.len();
                system.split(&[l], &[n]);
                std::thread::sleep(LEASE_TTL * 2);
                system.heal();
            }
        }
        Ok(1)
    }
}
