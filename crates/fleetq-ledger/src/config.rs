//! What a ledger runs under: the scheduler's settings, and the one policy
//! apply() itself enforces (wait-for-ready). Policies only the leader
//! reads (admission on submit, retention of finished workloads) live with
//! the leader in the server.

use std::time::Duration;

use fleetq_scheduler::SchedulerConfig;
use serde::{Deserialize, Serialize};

/// A ledger's settings. Every replica must run under the same ones: apply()
/// reads them (wait-for-ready refuses an eviction when it is off).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerConfig {
    /// How admission cycles decide (Kueue's Configuration, plus limits).
    pub scheduler: SchedulerConfig,
    /// Kueue's waitForPodsReady: the leader evicts an admission its
    /// executor has not reported running in time, and apply() checks the
    /// eviction against this. Off when `None` (Kueue's default).
    #[serde(default)]
    pub wait_for_ready: Option<WaitForReady>,
}

impl From<SchedulerConfig> for LedgerConfig {
    fn from(scheduler: SchedulerConfig) -> LedgerConfig {
        LedgerConfig {
            scheduler,
            wait_for_ready: None,
        }
    }
}

/// Kueue's `waitForPodsReady` with its `requeuingStrategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitForReady {
    /// An admission not reported running within this is evicted.
    pub timeout: Duration,
    /// The first requeue waits this long, each further one twice as long...
    pub backoff_base: Duration,
    /// ...up to this.
    pub backoff_max: Duration,
    /// After this many requeues the workload is deactivated (None: never).
    pub backoff_limit_count: Option<u32>,
}

impl WaitForReady {
    /// Kueue's defaults: 5 minutes, backoff 60 s doubling to 1 hour, no limit.
    pub fn kueue_default() -> WaitForReady {
        WaitForReady {
            timeout: Duration::from_secs(300),
            backoff_base: Duration::from_secs(60),
            backoff_max: Duration::from_secs(3600),
            backoff_limit_count: None,
        }
    }

    /// The wait before the `n`-th requeue (1-based): base * 2^(n-1), capped.
    pub fn backoff(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff_base
            .checked_mul(factor)
            .unwrap_or(self.backoff_max)
            .min(self.backoff_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_backoff_doubles_and_caps() {
        let w = WaitForReady {
            timeout: Duration::from_secs(300),
            backoff_base: Duration::from_secs(60),
            backoff_max: Duration::from_secs(3600),
            backoff_limit_count: None,
        };
        let secs: Vec<u64> = (1..=8).map(|n| w.backoff(n).as_secs()).collect();
        assert_eq!(secs, [60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(w.backoff(200).as_secs(), 3600);
    }
}
