//! A token bucket per key (GCRA, from the `governor` crate): `rate` writes
//! per second, up to `burst` at once. The key is a string: a tenant's
//! name, or a source IP address for a caller without a tenant.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::Quota;

/// Highest rate accepted (one write per microsecond).
pub const MAX_RATE: f64 = 1_000_000.0;

/// Forget keys that are back to a full bucket every this many checks, so
/// a stream of one-off addresses cannot grow the table without end.
const SWEEP_EVERY: u64 = 4096;

/// `rate` is 0 (off) or a positive number of writes per second.
pub fn check_rate(rate: f64) -> Result<(), String> {
    if rate.is_finite() && (0.0..=MAX_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(format!(
            "client_write_rate: {rate} is not 0 (unlimited) or a rate of up to {MAX_RATE} writes/s"
        ))
    }
}

/// One token bucket per key.
pub struct RateLimiter<C: Clock = DefaultClock> {
    buckets:
        governor::RateLimiter<String, HashMapStateStore<String>, C, NoOpMiddleware<C::Instant>>,
    clock: C,
    rate: f64,
    burst: u32,
    checks: AtomicU64,
}

impl RateLimiter<DefaultClock> {
    /// `rate` writes per second per key, `burst` at once (0: one second's
    /// worth, at least 1).
    pub fn new(rate: f64, burst: u32) -> Result<RateLimiter, String> {
        RateLimiter::with_clock(rate, burst, DefaultClock::default())
    }
}

impl<C: Clock + Clone> RateLimiter<C> {
    pub fn with_clock(rate: f64, burst: u32, clock: C) -> Result<RateLimiter<C>, String> {
        check_rate(rate)?;
        let period = Duration::try_from_secs_f64(1.0 / rate)
            .ok()
            .filter(|p| !p.is_zero())
            .ok_or_else(|| format!("client_write_rate: {rate} is not a usable rate"))?;
        let burst = if burst == 0 {
            rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32
        } else {
            burst
        };
        let quota = Quota::with_period(period)
            .ok_or_else(|| format!("client_write_rate: {rate} is not a usable rate"))?
            .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
        Ok(RateLimiter {
            buckets: governor::RateLimiter::new(quota, HashMapStateStore::default(), clock.clone()),
            clock,
            rate,
            burst,
            checks: AtomicU64::new(0),
        })
    }

    /// The burst in force (after the default).
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Takes a token from `key`'s bucket, or says why not.
    pub fn check(&self, key: &str) -> Result<(), String> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.buckets.retain_recent();
            self.buckets.shrink_to_fit();
        }
        self.buckets.check_key(&key.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            format!(
                "rate limit: {} writes/s per client (source {key}), bursts of up to {}; retry in {:.1}s",
                self.rate,
                self.burst,
                wait.as_secs_f64().max(0.1)
            )
        })
    }

    /// Takes `n` more tokens from `key`'s bucket (a batch of `n` writes
    /// beyond the one `check` took), or says why not. A batch larger than
    /// the burst can never pass.
    pub fn check_n(&self, key: &str, n: u32) -> Result<(), String> {
        let Some(n) = NonZeroU32::new(n) else {
            return Ok(());
        };
        match self.buckets.check_key_n(&key.to_string(), n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(self.clock.now());
                Err(format!(
                    "rate limit: {} writes/s per client (source {key}), a batch counts each workload; retry in {:.1}s",
                    self.rate,
                    wait.as_secs_f64().max(0.1)
                ))
            }
            Err(_) => Err(format!(
                "rate limit: a batch of {} workloads is more than a client's burst of {}; send smaller batches",
                n.get() + 1,
                self.burst
            )),
        }
    }

    /// Keys with a bucket that is not full (as of the last sweep).
    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    #[test]
    fn a_burst_then_the_rate_per_key() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(2.0, 3, clock.clone()).expect("valid");
        for _ in 0..3 {
            assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        }
        let refused = limiter.check("10.0.0.1").expect_err("burst spent");
        assert!(
            refused.starts_with("rate limit: 2 writes/s per client (source 10.0.0.1)"),
            "{refused}"
        );
        assert!(refused.contains("bursts of up to 3"), "{refused}");
        assert!(refused.contains("retry in 0.5s"), "{refused}");
        // Another client has its own bucket.
        assert_eq!(limiter.check("10.0.0.2"), Ok(()));
        // Half a second buys one more write at 2/s, not two.
        clock.advance(Duration::from_millis(500));
        assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        assert!(limiter.check("10.0.0.1").is_err());
        // After a long pause the whole burst is back, and no more.
        clock.advance(Duration::from_secs(60));
        for _ in 0..3 {
            assert_eq!(limiter.check("10.0.0.1"), Ok(()));
        }
        assert!(limiter.check("10.0.0.1").is_err());
    }

    #[test]
    fn a_batch_counts_each_workload() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(2.0, 10, clock).expect("valid");
        // A batch of 6: one token for the request, five more for the rest.
        assert_eq!(limiter.check("a"), Ok(()));
        assert_eq!(limiter.check_n("a", 5), Ok(()));
        // Four left: a second batch of 6 is refused, one of 4 passes.
        assert_eq!(limiter.check("a"), Ok(()));
        let refused = limiter.check_n("a", 5).expect_err("only three left");
        assert!(
            refused.contains("a batch counts each workload"),
            "{refused}"
        );
        // More than the burst can never pass.
        let never = limiter.check_n("b", 20).expect_err("over the burst");
        assert!(
            never.contains("more than a client's burst of 10"),
            "{never}"
        );
    }

    #[test]
    fn the_default_burst_is_one_seconds_worth() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(2.5, 0, clock.clone()).expect("valid");
        assert_eq!(limiter.burst(), 3);
        let slow = RateLimiter::with_clock(0.2, 0, clock).expect("valid");
        assert_eq!(slow.burst(), 1);
        assert_eq!(slow.check("a"), Ok(()));
        assert!(slow.check("a").is_err());
    }

    #[test]
    fn bad_rates_are_refused_naming_the_setting() {
        for rate in [-1.0, f64::NAN, f64::INFINITY, 2.0 * MAX_RATE] {
            let e = RateLimiter::new(rate, 0).err().unwrap_or_default();
            assert!(e.starts_with("client_write_rate:"), "{rate}: {e:?}");
        }
        // 0 is "off" for the node, but no limiter can run at it.
        assert!(RateLimiter::new(0.0, 0).is_err());
    }

    #[test]
    fn idle_keys_are_forgotten() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(1000.0, 1, clock.clone()).expect("valid");
        for i in 0..100 {
            assert_eq!(limiter.check(&format!("10.0.0.{i}")), Ok(()));
        }
        assert_eq!(limiter.tracked(), 100);
        clock.advance(Duration::from_secs(1));
        for _ in 0..SWEEP_EVERY {
            let _ = limiter.check("10.0.1.1");
        }
        assert!(limiter.tracked() <= 1, "{}", limiter.tracked());
    }
}
