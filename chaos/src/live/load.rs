//! The clients: submit workloads (real `sleep` children on the agents)
//! and cancel some, through any server, throughout the run. Every
//! operation's outcome is kept as the client saw it: acknowledged, or
//! unknown (an error or a timeout may still have been applied, so the
//! checker never assumes such a workload absent).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::system::Clients;

#[derive(Clone, Debug, Default)]
pub struct Outcomes {
    /// Names whose submission was acknowledged.
    pub acked: Vec<String>,
    /// Names whose submission's outcome is unknown.
    pub unknown: Vec<String>,
    pub cancels: usize,
    /// GPUs each submitted workload asks for, by name.
    pub gpus: std::collections::BTreeMap<String, u64>,
}

/// Runs until `stop`: one submission about every 250 ms, a cancel of an
/// earlier one about every tenth step.
pub fn run(clients: &Clients, outcomes: &Mutex<Outcomes>, stop: &Arc<AtomicBool>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("w-{seed}-{n}");
        let gpus_n = rng.gen_range(1..=4u32);
        lock(outcomes).gpus.insert(name.clone(), u64::from(gpus_n));
        let gpus = gpus_n.to_string();
        let secs = rng.gen_range(1..=3u32).to_string();
        let request = format!("nvidia.com/gpu={gpus}");
        let args = [
            "submit",
            "--queue",
            "chaos",
            "--name",
            &name,
            "--request",
            &request,
            "--",
            "sleep",
            &secs,
        ];
        let server = rng.gen_range(0..3usize);
        let result = clients.cli_at(server, &args, Duration::from_secs(15));
        {
            let mut o = lock(outcomes);
            match result {
                Ok(out) if out.status.success() => o.acked.push(name),
                _ => o.unknown.push(name),
            }
        }
        if rng.gen_ratio(1, 10) {
            let victim = {
                let o = lock(outcomes);
                (!o.acked.is_empty()).then(|| o.acked[rng.gen_range(0..o.acked.len())].clone())
            };
            if let Some(victim) = victim {
                let _ = clients.cli_at(
                    rng.gen_range(0..3usize),
                    &["cancel", &victim],
                    Duration::from_secs(15),
                );
                lock(outcomes).cancels += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..400)));
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
