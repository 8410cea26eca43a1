//! Kueue's quota rules, written again from its documentation in the
//! plainest form, sharing no code with `fleetq-scheduler` or
//! `fleetq-ledger`: recomputed from scratch each time it is asked, over
//! plain maps keyed by names.
//!
//! For every (flavor, resource) cell and every node of a cohort tree
//! (Kueue's hierarchical cohorts):
//!
//! - a node's *subtree quota* is its own nominal quota plus what each
//!   child offers up: the child's subtree quota minus its *guaranteed*
//!   part;
//! - the guaranteed part is what a lending limit keeps private:
//!   `subtree quota - lendingLimit`, or nothing without a lending limit;
//! - a ClusterQueue's usage is the sum over its reservations; a cohort's
//!   usage is what its children use beyond their guaranteed parts;
//! - usage is within quota when every node with a borrowing limit uses at
//!   most `subtree quota + borrowingLimit`, and every root (a cohort
//!   without a parent, or a ClusterQueue without a cohort) at most its
//!   subtree quota;
//! - a ClusterQueue may only use cells it has a quota line for.

use std::collections::BTreeMap;

use fleetq_model::Config;

/// A (flavor, resource) cell.
pub type Cell = (String, String);

/// Usage or quota per cell, in milli-units.
pub type Amounts = BTreeMap<Cell, u64>;

#[derive(Clone, Debug, Default)]
struct Line {
    nominal: u64,
    borrowing_limit: Option<u64>,
    lending_limit: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct TreeNode {
    is_cohort: bool,
    parent: Option<String>,
    lines: BTreeMap<Cell, Line>,
}

/// A node's name in the books: `ClusterQueue/x` or `Cohort/y`, so the
/// two kinds cannot collide.
pub fn cq_key(name: &str) -> String {
    format!("ClusterQueue/{name}")
}

pub fn cohort_key(name: &str) -> String {
    format!("Cohort/{name}")
}

/// The cohort forest of one configuration.
pub struct Tree {
    nodes: BTreeMap<String, TreeNode>,
}

fn lines_of(groups: &[fleetq_model::cluster_queue::ResourceGroup]) -> BTreeMap<Cell, Line> {
    let mut lines = BTreeMap::new();
    for group in groups {
        for flavor in &group.flavors {
            for quota in &flavor.resources {
                lines.insert(
                    (flavor.name.clone(), quota.name.clone()),
                    Line {
                        nominal: quota.nominal_quota.milli(),
                        borrowing_limit: quota.borrowing_limit.map(|q| q.milli()),
                        lending_limit: quota.lending_limit.map(|q| q.milli()),
                    },
                );
            }
        }
    }
    lines
}

impl Tree {
    pub fn from_config(config: &Config) -> Tree {
        let mut nodes = BTreeMap::new();
        for cohort in config.cohorts.values() {
            nodes.insert(
                cohort_key(&cohort.name),
                TreeNode {
                    is_cohort: true,
                    parent: cohort.spec.parent.as_deref().map(cohort_key),
                    lines: lines_of(&cohort.spec.resource_groups),
                },
            );
        }
        for cq in config.cluster_queues.values() {
            if let Some(cohort) = &cq.spec.cohort {
                // A cohort named without a Cohort object exists, empty.
                nodes.entry(cohort_key(cohort)).or_insert(TreeNode {
                    is_cohort: true,
                    ..TreeNode::default()
                });
            }
            nodes.insert(
                cq_key(&cq.name),
                TreeNode {
                    is_cohort: false,
                    parent: cq.spec.cohort.as_deref().map(cohort_key),
                    lines: lines_of(&cq.spec.resource_groups),
                },
            );
        }
        // A parent named without a Cohort object exists too.
        let parents: Vec<String> = nodes.values().filter_map(|n| n.parent.clone()).collect();
        for p in parents {
            nodes.entry(p).or_insert(TreeNode {
                is_cohort: true,
                ..TreeNode::default()
            });
        }
        Tree { nodes }
    }

    fn children<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.nodes
            .iter()
            .filter(move |(_, n)| n.parent.as_deref() == Some(name))
            .map(|(k, _)| k)
    }

    /// Every cell any node has a line for.
    fn cells(&self) -> Vec<Cell> {
        let mut cells: Vec<Cell> = self
            .nodes
            .values()
            .flat_map(|n| n.lines.keys().cloned())
            .collect();
        cells.sort();
        cells.dedup();
        cells
    }

    /// Own nominal plus what the children offer up (depth-first; the
    /// depth guard stops a cycle validation should have refused).
    pub fn subtree_quota(&self, name: &str, cell: &Cell) -> u64 {
        self.subtree_at(name, cell, 0)
    }

    fn subtree_at(&self, name: &str, cell: &Cell, depth: usize) -> u64 {
        let Some(node) = self.nodes.get(name) else {
            return 0;
        };
        let own = node.lines.get(cell).map_or(0, |l| l.nominal);
        if depth > 64 {
            return own;
        }
        let offered: u64 = self
            .children(name)
            .map(|c| {
                let sub = self.subtree_at(c, cell, depth + 1);
                sub - self.guaranteed_of(c, cell, sub)
            })
            .sum();
        own + offered
    }

    fn guaranteed_of(&self, name: &str, cell: &Cell, subtree: u64) -> u64 {
        self.nodes
            .get(name)
            .and_then(|n| n.lines.get(cell))
            .and_then(|l| l.lending_limit)
            .map_or(0, |lend| subtree.saturating_sub(lend))
    }

    /// The guaranteed (private) part of a node's subtree quota.
    pub fn guaranteed(&self, name: &str, cell: &Cell) -> u64 {
        self.guaranteed_of(name, cell, self.subtree_quota(name, cell))
    }

    /// Usage of every node, from the ClusterQueues' usage: a cohort uses
    /// what its children use beyond their guaranteed parts.
    pub fn usage(&self, cq_usage: &BTreeMap<String, Amounts>) -> BTreeMap<String, Amounts> {
        let mut out: BTreeMap<String, Amounts> = BTreeMap::new();
        for cell in self.cells().into_iter().chain(
            cq_usage
                .values()
                .flat_map(|a| a.keys().cloned())
                .collect::<Vec<_>>(),
        ) {
            for name in self.nodes.keys() {
                let u = self.usage_at(name, &cell, cq_usage, 0);
                if u > 0 {
                    out.entry(name.clone()).or_default().insert(cell.clone(), u);
                }
            }
        }
        out
    }

    fn usage_at(
        &self,
        name: &str,
        cell: &Cell,
        cq_usage: &BTreeMap<String, Amounts>,
        depth: usize,
    ) -> u64 {
        let Some(node) = self.nodes.get(name) else {
            return 0;
        };
        if !node.is_cohort {
            return cq_usage
                .get(name)
                .and_then(|a| a.get(cell))
                .copied()
                .unwrap_or(0);
        }
        if depth > 64 {
            return 0;
        }
        self.children(name)
            .map(|c| {
                let u = self.usage_at(c, cell, cq_usage, depth + 1);
                u.saturating_sub(self.guaranteed(c, cell))
            })
            .sum()
    }

    /// Every way `cq_usage` breaks the quota rules, one line each, naming
    /// the node, the cell and both figures.
    pub fn violations(&self, cq_usage: &BTreeMap<String, Amounts>) -> Vec<String> {
        let mut out = Vec::new();
        for (cq, amounts) in cq_usage {
            let Some(node) = self.nodes.get(cq) else {
                if amounts.values().any(|&v| v > 0) {
                    out.push(format!("{cq} holds quota but is not configured"));
                }
                continue;
            };
            for (cell, &v) in amounts {
                if v > 0 && !node.lines.contains_key(cell) {
                    out.push(format!(
                        "{cq} uses {} of {}/{} but has no quota line for it",
                        milli(v),
                        cell.0,
                        cell.1
                    ));
                }
            }
        }
        let usage = self.usage(cq_usage);
        for (name, node) in &self.nodes {
            let Some(amounts) = usage.get(name) else {
                continue;
            };
            for (cell, &used) in amounts {
                let subtree = self.subtree_quota(name, cell);
                let limit = match (
                    &node.parent,
                    node.lines.get(cell).and_then(|l| l.borrowing_limit),
                ) {
                    (None, _) => Some((subtree, "its subtree quota")),
                    (Some(_), Some(b)) => Some((subtree + b, "its subtree quota + borrowingLimit")),
                    (Some(_), None) => None,
                };
                if let Some((allowed, what)) = limit {
                    if used > allowed {
                        out.push(format!(
                            "{name} uses {} of {}/{}, over {what} {}",
                            milli(used),
                            cell.0,
                            cell.1,
                            milli(allowed)
                        ));
                    }
                }
            }
        }
        out
    }
}

/// Milli-units as a plain number (`1.5`, `4`).
pub fn milli(v: u64) -> String {
    if v % 1000 == 0 {
        format!("{}", v / 1000)
    } else {
        format!("{}.{:03}", v / 1000, v % 1000)
            .trim_end_matches('0')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::kueue::import_manifests;

    fn config(yaml: &str) -> Config {
        let mut config = Config::default();
        for doc in import_manifests(yaml).expect("test manifests") {
            config.upsert(doc.object).expect("not a workload");
        }
        assert!(config.validate().is_empty());
        config
    }

    fn usage(entries: &[(&str, u64)]) -> BTreeMap<String, Amounts> {
        entries
            .iter()
            .map(|(cq, units)| {
                (
                    cq_key(cq),
                    BTreeMap::from([(
                        ("h100".to_string(), "nvidia.com/gpu".to_string()),
                        units * 1000,
                    )]),
                )
            })
            .collect()
    }

    const TWO: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  namespaceSelector: {}
  cohortName: pool
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: b}
spec:
  namespaceSelector: {}
  cohortName: pool
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 1}
"#;

    #[test]
    fn lending_and_borrowing_limits_bound_what_others_use() {
        let tree = Tree::from_config(&config(TWO));
        // b may borrow 1 (its limit), and a lends at most 2.
        assert!(tree.violations(&usage(&[("a", 0), ("b", 5)])).is_empty());
        let v = tree.violations(&usage(&[("a", 0), ("b", 6)]));
        assert!(v.iter().any(|l| l.contains("borrowingLimit")), "{v:?}");
        // a uses its 8 and b its 4: exactly the pool.
        assert!(tree.violations(&usage(&[("a", 8), ("b", 4)])).is_empty());
        // a may borrow what b does not use: b's 4 are all lendable.
        assert!(tree.violations(&usage(&[("a", 12), ("b", 0)])).is_empty());
        let v = tree.violations(&usage(&[("a", 9), ("b", 4)]));
        assert!(v.iter().any(|l| l.contains("Cohort/pool")), "{v:?}");
        // a's guaranteed 6 are not b's to take, even with a idle.
        let loose = TWO.replace("borrowingLimit: 1", "borrowingLimit: 99");
        let tree = Tree::from_config(&config(&loose));
        assert!(tree.violations(&usage(&[("a", 0), ("b", 6)])).is_empty());
        let v = tree.violations(&usage(&[("a", 0), ("b", 7)]));
        assert!(v.iter().any(|l| l.contains("Cohort/pool")), "{v:?}");
        assert_eq!(
            tree.guaranteed(&cq_key("a"), &("h100".into(), "nvidia.com/gpu".into())),
            6000
        );
    }

    #[test]
    fn a_queue_without_a_cohort_is_its_own_root() {
        // Limits need a cohort (Kueue refuses them without one).
        let yaml = TWO
            .replace("  cohortName: pool\n", "")
            .replace(", lendingLimit: 2", "")
            .replace(", borrowingLimit: 1", "");
        let tree = Tree::from_config(&config(&yaml));
        assert!(tree.violations(&usage(&[("a", 8), ("b", 4)])).is_empty());
        assert!(!tree.violations(&usage(&[("a", 9)])).is_empty());
        let v = tree.violations(&usage(&[("nobody", 1)]));
        assert!(v.iter().any(|l| l.contains("not configured")), "{v:?}");
    }
}
