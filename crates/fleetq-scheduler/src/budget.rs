//! GPU-second budgets: a token bucket per LocalQueue (tenant).
//!
//! The bucket refills at `gpuSecondsPerHour` up to `burstGpuSeconds`.
//! Admission charges pods x GPUs x maximum runtime; a release refunds the
//! part of that time the workload did not use. Amounts are milli-GPU-seconds
//! so the arithmetic stays exact.

use std::time::Duration;

use fleetq_model::local_queue::GpuBudget;
use fleetq_model::Timestamp;
use serde::{Deserialize, Serialize};

/// Tokens in the bucket at a moment; a LocalQueue never charged has a full one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetState {
    pub tokens: u64,
    pub at: Timestamp,
}

fn burst(spec: GpuBudget) -> u64 {
    spec.burst_gpu_seconds.saturating_mul(1000)
}

/// Tokens (milli-GPU-seconds) available at `now`.
pub fn tokens_at(spec: GpuBudget, state: Option<BudgetState>, now: Timestamp) -> u64 {
    let Some(state) = state else {
        return burst(spec);
    };
    let elapsed_ms = u128::from(now.0.saturating_sub(state.at.0));
    // rate GPU-s/h = rate * 1000 milli-GPU-s per 3.6e6 ms
    let refill = u128::from(spec.gpu_seconds_per_hour) * elapsed_ms / 3_600;
    let tokens = u128::from(state.tokens) + refill;
    tokens.min(u128::from(burst(spec))) as u64
}

/// The bucket after taking `amount` at `at` (never below zero).
pub fn charge(
    spec: GpuBudget,
    state: Option<BudgetState>,
    at: Timestamp,
    amount: u64,
) -> BudgetState {
    BudgetState {
        tokens: tokens_at(spec, state, at).saturating_sub(amount),
        at,
    }
}

/// The bucket after giving back `amount` at `at` (never above the burst).
pub fn credit(
    spec: GpuBudget,
    state: Option<BudgetState>,
    at: Timestamp,
    amount: u64,
) -> BudgetState {
    BudgetState {
        tokens: tokens_at(spec, state, at)
            .saturating_add(amount)
            .min(burst(spec)),
        at,
    }
}

/// What an admission costs: `gpu_milli` (all pods together) for `max_runtime`.
pub fn cost(gpu_milli: u64, max_runtime: Duration) -> u64 {
    let secs = max_runtime.as_millis().div_ceil(1000);
    (u128::from(gpu_milli) * secs).min(u128::from(u64::MAX)) as u64
}

/// The unused share of `charged` after running `ran` of `max_runtime`.
pub fn refund(charged: u64, max_runtime: Duration, ran: Duration) -> u64 {
    let max = max_runtime.as_millis();
    if max == 0 {
        return 0;
    }
    let unused = max.saturating_sub(ran.as_millis());
    (u128::from(charged) * unused / max) as u64
}

/// When the bucket will hold `cost`; `None` if it never can (above burst
/// or no refill).
pub fn fits_at(
    spec: GpuBudget,
    state: Option<BudgetState>,
    now: Timestamp,
    cost: u64,
) -> Option<Timestamp> {
    let tokens = tokens_at(spec, state, now);
    if cost <= tokens {
        return Some(now);
    }
    if cost > burst(spec) || spec.gpu_seconds_per_hour == 0 {
        return None;
    }
    let missing = u128::from(cost - tokens);
    let ms = (missing * 3_600).div_ceil(u128::from(spec.gpu_seconds_per_hour));
    Some(Timestamp(
        now.0.saturating_add(ms.min(u128::from(u64::MAX)) as u64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: GpuBudget = GpuBudget {
        gpu_seconds_per_hour: 3_600,
        burst_gpu_seconds: 7_200,
    };

    #[test]
    fn refills_at_rate_up_to_burst() {
        let drained = charge(SPEC, None, Timestamp(0), 7_200_000);
        assert_eq!(drained.tokens, 0);
        // 3600 GPU-s per hour = 1 GPU-s per second.
        assert_eq!(tokens_at(SPEC, Some(drained), Timestamp(10_000)), 10_000);
        assert_eq!(
            tokens_at(SPEC, Some(drained), Timestamp(100_000_000)),
            7_200_000
        );
    }

    #[test]
    fn fits_at_is_exact_and_refuses_above_burst() {
        let drained = charge(SPEC, None, Timestamp(0), 7_200_000);
        assert_eq!(
            fits_at(SPEC, Some(drained), Timestamp(0), 60_000),
            Some(Timestamp(60_000))
        );
        assert_eq!(fits_at(SPEC, Some(drained), Timestamp(0), 7_200_001), None);
    }

    #[test]
    fn refund_returns_unused_time() {
        let c = cost(2_000, Duration::from_secs(100));
        assert_eq!(c, 200_000);
        assert_eq!(
            refund(c, Duration::from_secs(100), Duration::from_secs(25)),
            150_000
        );
        assert_eq!(
            refund(c, Duration::from_secs(100), Duration::from_secs(500)),
            0
        );
    }
}
