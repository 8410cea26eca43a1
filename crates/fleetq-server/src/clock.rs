//! The one clock the control plane reads. The leader stamps every ledger
//! command with it; nothing in the ledger path reads the system time
//! directly, so the simulator can substitute its own.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use fleetq_model::Timestamp;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time, for real deployments.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Timestamp(ms)
    }
}

/// tokio's clock from a fixed origin: simulated time under turmoil or a
/// paused tokio runtime.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    origin_ms: u64,
}

impl TokioClock {
    pub fn new(origin_ms: u64) -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
            origin_ms,
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.origin_ms + self.origin.elapsed().as_millis() as u64)
    }
}
