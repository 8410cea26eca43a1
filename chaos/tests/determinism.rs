//! Same seed, same run: two runs of one seed in one process take the same
//! course to the simulated nanosecond (equal trace digests), whatever the
//! fault. Needs the workspace's `--cfg tokio_unstable` (.cargo/config.toml):
//! without it tokio's scheduler draws from an unseeded source.

use fleetq_chaos::run_seed;

#[test]
#[cfg_attr(
    not(tokio_unstable),
    ignore = "needs --cfg tokio_unstable (set in .cargo/config.toml)"
)]
fn a_seed_replays_exactly() {
    // 1: no fault; 3 and 6: leader partitions; 17: leader crash; 0:
    // follower crash (see sim_smoke.rs).
    for seed in [1u64, 3, 6, 17, 0] {
        let first = run_seed(seed).unwrap_or_else(|e| panic!("{e}"));
        let second = run_seed(seed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            first.trace, second.trace,
            "seed {seed} took two courses:\n{first}\n{second}"
        );
    }
}
