//! Planted bugs, to prove the chaos checker can fail (docs/architecture.md §6 is only
//! as good as the checker that enforces it). Compiled in only with the
//! `chaos-mutants` feature, which nothing but `fleetq-chaos`'s mutant
//! test enables; without it [`active`] is a constant `false` and every
//! hook folds away. With it, `FLEETQ_MUTANT=<name>` in the environment
//! switches one bug on for the whole process.

/// Whether the planted bugs are compiled in (the `chaos-mutants` feature).
/// Such builds also check the ledger's invariants after every command,
/// as debug builds do, so the mutant test can run optimised.
pub const COMPILED: bool = cfg!(feature = "chaos-mutants");

/// A known bug of the class the chaos suite exists to catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// apply() trusts the leader's decision: an admission that no longer
    /// fits quota or cluster is recorded anyway.
    SkipRevalidation,
    /// An admission the leader planned into the entry that submits the
    /// workload is recorded without re-validation.
    OnSubmitSkipsRevalidation,
    /// A finished workload's quota is released twice.
    DoubleRelease,
    /// Cancel releases the quota at once, before the executor confirms
    /// the workload stopped.
    ReleaseOnCancel,
    /// The agent keeps running its workloads after its lease ran out.
    AgentIgnoresFence,
    /// A new leader expires clusters at once instead of waiting a lease.
    ExpireWithoutWaiting,
    /// Retention removes workloads nothing happened to for the retention,
    /// finished or not, releasing what they held: a long run loses its
    /// record and its quota while it still runs.
    RemoveUnfinished,
    // The bugs below sit in arithmetic the scheduler, apply() and the
    // ledger's own invariant check share, so that check cannot see them:
    // only the independent oracle (chaos/src/oracle) and the journals can.
    /// The quota tree ignores lending limits: a queue's private share is
    /// lent out too.
    LendingLimitIgnored,
    /// A borrowing limit lets a queue borrow one unit more than it says.
    BorrowingLimitOffByOne,
    /// A cohort's own nominal quota counts twice in its subtree quota.
    CohortQuotaDoubled,
    /// A status report is applied whatever epoch it carries: a late
    /// report of an earlier admission ends or stops the current one.
    StaleEpochReport,
    /// Preemption's livelock, restored as the unfixed code had it: no
    /// nominated preemptors, heads by priority before borrowing, and a
    /// victim free to borrow back what its reclaimer took (no hold, in
    /// the scheduler and in apply()'s re-check alike), so a victim can be
    /// re-admitted into the room its preemptor waits for, again and again.
    PreemptorNotNominated,
    /// Node placement ignores what is already assigned on a node, in the
    /// scheduler and in apply()'s re-check alike (issue 26): pods land on
    /// a node that has no room left.
    PlacementIgnoresNodeUsage,
    /// A node that leaves under running pods goes unnoticed: the ledger
    /// neither fences nor keeps the workloads on it (issue 26).
    NodeLeftIgnored,
    /// A required topology level is taken as preferred, in the scheduler
    /// and in apply()'s re-check alike (issue 26): a gang that must stay
    /// in one rack is spread over two.
    RequiredTopologyIgnored,
}

impl Mutant {
    pub const ALL: [Mutant; 15] = [
        Mutant::SkipRevalidation,
        Mutant::OnSubmitSkipsRevalidation,
        Mutant::DoubleRelease,
        Mutant::ReleaseOnCancel,
        Mutant::AgentIgnoresFence,
        Mutant::ExpireWithoutWaiting,
        Mutant::RemoveUnfinished,
        Mutant::LendingLimitIgnored,
        Mutant::BorrowingLimitOffByOne,
        Mutant::CohortQuotaDoubled,
        Mutant::StaleEpochReport,
        Mutant::PreemptorNotNominated,
        Mutant::PlacementIgnoresNodeUsage,
        Mutant::NodeLeftIgnored,
        Mutant::RequiredTopologyIgnored,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::SkipRevalidation => "skip-revalidation",
            Mutant::OnSubmitSkipsRevalidation => "on-submit-skips-revalidation",
            Mutant::DoubleRelease => "double-release",
            Mutant::ReleaseOnCancel => "release-on-cancel",
            Mutant::AgentIgnoresFence => "agent-ignores-fence",
            Mutant::ExpireWithoutWaiting => "expire-without-waiting",
            Mutant::RemoveUnfinished => "remove-unfinished",
            Mutant::LendingLimitIgnored => "lending-limit-ignored",
            Mutant::BorrowingLimitOffByOne => "borrowing-limit-off-by-one",
            Mutant::CohortQuotaDoubled => "cohort-quota-doubled",
            Mutant::StaleEpochReport => "stale-epoch-report",
            Mutant::PreemptorNotNominated => "preemptor-not-nominated",
            Mutant::PlacementIgnoresNodeUsage => "placement-ignores-node-usage",
            Mutant::NodeLeftIgnored => "node-left-ignored",
            Mutant::RequiredTopologyIgnored => "required-topology-ignored",
        }
    }

    pub fn parse(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Whether `mutant` is switched on in this process.
#[cfg(feature = "chaos-mutants")]
pub fn active(mutant: Mutant) -> bool {
    static SELECTED: std::sync::OnceLock<Option<Mutant>> = std::sync::OnceLock::new();
    *SELECTED.get_or_init(|| {
        std::env::var("FLEETQ_MUTANT")
            .ok()
            .and_then(|n| Mutant::parse(&n))
    }) == Some(mutant)
}

/// Whether `mutant` is switched on: never, in a build without
/// `chaos-mutants`.
#[cfg(not(feature = "chaos-mutants"))]
#[inline(always)]
pub const fn active(_mutant: Mutant) -> bool {
    false
}
