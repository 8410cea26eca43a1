//! The cohort tree with quota and usage per (flavor, resource).
//!
//! Semantics follow Kueue's hierarchical cohorts:
//!
//! - `subtree_quota(n)` = own nominal + what every child lends up
//!   (`subtree_quota(child) - guaranteed(child)`).
//! - `guaranteed(n)` = the part a lending limit keeps private:
//!   `subtree_quota - lendingLimit` (0 without a lending limit).
//! - A parent's usage is what its children use beyond their guaranteed part.
//! - `available(n)` = unused guaranteed quota + what the parent can still
//!   give, capped by `borrowingLimit`.
//!
//! Cells are interned: a [`FrId`] indexes a flat `Vec<u64>` of milli-units per
//! node, so a scheduling cycle can copy all usage in one memcpy and every
//! check walks one path of the tree without hashing.

use std::collections::BTreeMap;

use fleetq_model::cluster_queue::ResourceGroup;
use fleetq_model::{Config, FlavorResource, Quantity};

/// Index of a (flavor, resource) cell.
pub type FrId = usize;
/// Index of a node (ClusterQueue or Cohort) in the tree.
pub type NodeId = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    ClusterQueue,
    Cohort,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub nominal: u64,
    pub borrowing_limit: Option<u64>,
    pub lending_limit: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    /// Own quota per cell (None = this node has no quota line for the cell).
    pub limits: Vec<Option<Limits>>,
    pub subtree_quota: Vec<u64>,
    pub guaranteed: Vec<u64>,
    /// Kueue's `getNodeHeight`: the distance to the furthest leaf (0 for a
    /// ClusterQueue or an empty cohort, 1 for a cohort of ClusterQueues).
    pub height: usize,
}

/// The static structure of the tree; usage lives in [`Usage`] so a cycle can
/// copy it cheaply.
#[derive(Clone, Debug, Default)]
pub struct QuotaTree {
    pub nodes: Vec<Node>,
    pub cells: Vec<FlavorResource>,
    /// flavor -> resource -> cell, nested so a lookup by `&str` allocates
    /// nothing (it sits on the hot path of every admission attempt).
    cell_index: BTreeMap<String, BTreeMap<String, FrId>>,
    cluster_queues_by_name: BTreeMap<String, NodeId>,
    cohorts_by_name: BTreeMap<String, NodeId>,
}

/// Usage of every node in milli-units, `nodes x cells`, row-major.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    cells: usize,
    values: Vec<u64>,
}

impl Usage {
    pub fn get(&self, node: NodeId, fr: FrId) -> u64 {
        self.values[node * self.cells + fr]
    }

    fn slot(&mut self, node: NodeId, fr: FrId) -> &mut u64 {
        &mut self.values[node * self.cells + fr]
    }
}

impl QuotaTree {
    /// Builds the tree from a configuration that passed validation. Cohorts
    /// that ClusterQueues or Cohorts name without a Cohort object exist
    /// implicitly, as in Kueue, with no quota of their own.
    pub fn build(config: &Config) -> QuotaTree {
        let mut tree = QuotaTree::default();
        let mut groups_of: Vec<&[ResourceGroup]> = Vec::new();
        for cohort in config.cohorts.values() {
            tree.add_node(&cohort.name, NodeKind::Cohort);
            groups_of.push(&cohort.spec.resource_groups);
        }
        // So do the parents Cohorts name without a Cohort object.
        for cohort in config.cohorts.values() {
            if let Some(parent) = &cohort.spec.parent {
                if tree.cohort(parent).is_none() {
                    tree.add_node(parent, NodeKind::Cohort);
                    groups_of.push(&[]);
                }
            }
        }
        for cq in config.cluster_queues.values() {
            if let Some(cohort) = &cq.spec.cohort {
                if tree.cohort(cohort).is_none() {
                    tree.add_node(cohort, NodeKind::Cohort);
                    groups_of.push(&[]);
                }
            }
            tree.add_node(&cq.name, NodeKind::ClusterQueue);
            groups_of.push(&cq.spec.resource_groups);
        }
        // Intern every cell any node has a quota line for.
        for groups in &groups_of {
            for group in *groups {
                for flavor in &group.flavors {
                    for quota in &flavor.resources {
                        tree.intern(FlavorResource::new(&flavor.name, &quota.name));
                    }
                }
            }
        }
        let cells = tree.cells.len();
        for (id, groups) in groups_of.iter().enumerate() {
            let mut limits = vec![None; cells];
            for group in *groups {
                for flavor in &group.flavors {
                    for quota in &flavor.resources {
                        let fr = tree.intern(FlavorResource::new(&flavor.name, &quota.name));
                        limits[fr] = Some(Limits {
                            nominal: quota.nominal_quota.milli(),
                            borrowing_limit: quota.borrowing_limit.map(Quantity::milli),
                            lending_limit: quota.lending_limit.map(Quantity::milli),
                        });
                    }
                }
            }
            tree.nodes[id].limits = limits;
            tree.nodes[id].subtree_quota = vec![0; cells];
            tree.nodes[id].guaranteed = vec![0; cells];
        }
        // Parents. Validation rejected cycles; guard anyway by refusing a
        // parent link that would close one.
        for cohort in config.cohorts.values() {
            if let Some(parent) = &cohort.spec.parent {
                let (child, parent) = (tree.cohort(&cohort.name), tree.cohort(parent));
                if let (Some(c), Some(p)) = (child, parent) {
                    if !tree.is_ancestor_or_self(c, p) {
                        tree.link(c, p);
                    }
                }
            }
        }
        for cq in config.cluster_queues.values() {
            if let (Some(c), Some(p)) = (
                tree.cluster_queue(&cq.name),
                cq.spec.cohort.as_deref().and_then(|n| tree.cohort(n)),
            ) {
                tree.link(c, p);
            }
        }
        for root in 0..tree.nodes.len() {
            if tree.nodes[root].parent.is_none() {
                tree.compute_subtree(root);
                tree.compute_heights(root);
            }
        }
        tree
    }

    /// Sets every node's `height` under `root`, children before parents
    /// (iterative: a cohort tree may be deep).
    fn compute_heights(&mut self, root: NodeId) {
        let mut order = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            order.push(n);
            stack.extend(self.nodes[n].children.iter().copied());
        }
        for &n in order.iter().rev() {
            let children = &self.nodes[n].children;
            let mut height = usize::from(!children.is_empty());
            for &c in children {
                if self.nodes[c].kind == NodeKind::Cohort {
                    height = height.max(self.nodes[c].height + 1);
                }
            }
            self.nodes[n].height = height;
        }
    }

    fn add_node(&mut self, name: &str, kind: NodeKind) -> NodeId {
        let id = self.nodes.len();
        self.nodes.push(Node {
            name: name.to_string(),
            kind,
            parent: None,
            children: Vec::new(),
            limits: Vec::new(),
            subtree_quota: Vec::new(),
            guaranteed: Vec::new(),
            height: 0,
        });
        let index = match kind {
            NodeKind::ClusterQueue => &mut self.cluster_queues_by_name,
            NodeKind::Cohort => &mut self.cohorts_by_name,
        };
        index.insert(name.to_string(), id);
        id
    }

    fn intern(&mut self, fr: FlavorResource) -> FrId {
        if let Some(id) = self.cell_of(&fr.flavor, &fr.resource) {
            return id;
        }
        let id = self.cells.len();
        self.cells.push(fr.clone());
        self.cell_index
            .entry(fr.flavor.clone())
            .or_default()
            .insert(fr.resource.clone(), id);
        id
    }

    fn link(&mut self, child: NodeId, parent: NodeId) {
        self.nodes[child].parent = Some(parent);
        self.nodes[parent].children.push(child);
    }

    fn is_ancestor_or_self(&self, ancestor: NodeId, mut node: NodeId) -> bool {
        loop {
            if node == ancestor {
                return true;
            }
            match self.nodes[node].parent {
                Some(p) => node = p,
                None => return false,
            }
        }
    }

    fn compute_subtree(&mut self, node: NodeId) {
        let children = self.nodes[node].children.clone();
        for &child in &children {
            self.compute_subtree(child);
        }
        for fr in 0..self.cells.len() {
            let mut own = self.nodes[node].limits[fr]
                .as_ref()
                .map_or(0, |l| l.nominal);
            if self.nodes[node].kind == NodeKind::Cohort
                && fleetq_model::mutants::active(fleetq_model::mutants::Mutant::CohortQuotaDoubled)
            {
                own = own.saturating_mul(2);
            }
            let lent_up: u64 = children
                .iter()
                .map(|&c| self.nodes[c].subtree_quota[fr] - self.nodes[c].guaranteed[fr])
                .fold(0u64, u64::saturating_add);
            let subtree = own.saturating_add(lent_up);
            let guaranteed = match self.nodes[node].limits[fr]
                .as_ref()
                .and_then(|l| l.lending_limit)
                .filter(|_| {
                    !fleetq_model::mutants::active(
                        fleetq_model::mutants::Mutant::LendingLimitIgnored,
                    )
                }) {
                Some(lending) => subtree.saturating_sub(lending),
                None => 0,
            };
            // A root lends to nobody: all of its quota is its own.
            let guaranteed = if self.nodes[node].parent.is_none() {
                0
            } else {
                guaranteed
            };
            self.nodes[node].subtree_quota[fr] = subtree;
            self.nodes[node].guaranteed[fr] = guaranteed;
        }
    }

    pub fn cell(&self, fr: &FlavorResource) -> Option<FrId> {
        self.cell_of(&fr.flavor, &fr.resource)
    }

    pub fn cell_of(&self, flavor: &str, resource: &str) -> Option<FrId> {
        self.cell_index.get(flavor)?.get(resource).copied()
    }

    pub fn cluster_queue(&self, name: &str) -> Option<NodeId> {
        self.cluster_queues_by_name.get(name).copied()
    }

    pub fn cohort(&self, name: &str) -> Option<NodeId> {
        self.cohorts_by_name.get(name).copied()
    }

    pub fn cluster_queue_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::ClusterQueue)
            .map(|(i, _)| i)
    }

    /// Kueue's `FindHeightOfLowestSubtreeThatFits`: the height of the
    /// lowest subtree holding `node` whose quota has room for `q` more of
    /// `fr` (0 when `node`'s own quota has; a workload's borrowing level),
    /// and whether that subtree is below the root (a hierarchical
    /// advantage). Without such a subtree, the whole tree's height.
    pub fn lowest_subtree_that_fits(
        &self,
        usage: &Usage,
        node: NodeId,
        fr: FrId,
        q: u64,
    ) -> (usize, bool) {
        let n = &self.nodes[node];
        if usage.get(node, fr).saturating_add(q) <= n.subtree_quota[fr] || n.parent.is_none() {
            return (0, n.parent.is_some());
        }
        let mut remaining = q.saturating_sub(n.guaranteed[fr].saturating_sub(usage.get(node, fr)));
        let mut level = n.parent;
        while let Some(cohort) = level {
            let c = &self.nodes[cohort];
            let used = usage.get(cohort, fr);
            if used.saturating_add(remaining) <= c.subtree_quota[fr] {
                return (c.height, c.parent.is_some());
            }
            remaining = remaining.saturating_sub(c.guaranteed[fr].saturating_sub(used));
            level = c.parent;
        }
        (self.nodes[self.root_of(node)].height, false)
    }

    /// The root of the tree `node` is in (itself without a parent).
    pub fn root_of(&self, node: NodeId) -> NodeId {
        let mut n = node;
        while let Some(p) = self.nodes[n].parent {
            n = p;
        }
        n
    }

    /// ClusterQueues in the subtree of `node`, depth first.
    pub fn cluster_queues_under(&self, node: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            match self.nodes[n].kind {
                NodeKind::ClusterQueue => out.push(n),
                NodeKind::Cohort => stack.extend(self.nodes[n].children.iter().rev()),
            }
        }
        out
    }

    pub fn new_usage(&self) -> Usage {
        Usage {
            cells: self.cells.len(),
            values: vec![0; self.cells.len() * self.nodes.len()],
        }
    }

    /// The most `node` could ever hold of `fr` with nothing else running:
    /// its own quota plus everything its ancestors could lend, within
    /// borrowing limits.
    pub fn max_capacity(&self, node: NodeId, fr: FrId) -> u64 {
        self.available_with(node, fr, &|_, _| 0)
    }

    /// How much more of `fr` a workload in `node` can use right now.
    pub fn available(&self, usage: &Usage, node: NodeId, fr: FrId) -> u64 {
        self.available_with(node, fr, &|n, f| usage.get(n, f))
    }

    fn available_with(&self, node: NodeId, fr: FrId, usage: &dyn Fn(NodeId, FrId) -> u64) -> u64 {
        let n = &self.nodes[node];
        let used = usage(node, fr);
        let Some(parent) = n.parent else {
            return n.subtree_quota[fr].saturating_sub(used);
        };
        let guaranteed = n.guaranteed[fr];
        let local = guaranteed.saturating_sub(used);
        let mut from_parent = self.available_with(parent, fr, usage);
        if let Some(mut limit) = n.limits[fr].as_ref().and_then(|l| l.borrowing_limit) {
            if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::BorrowingLimitOffByOne)
            {
                limit = limit.saturating_add(1000);
            }
            let stored_in_parent = n.subtree_quota[fr] - guaranteed;
            let used_in_parent = used.saturating_sub(guaranteed);
            let cap = stored_in_parent
                .saturating_add(limit)
                .saturating_sub(used_in_parent);
            from_parent = from_parent.min(cap);
        }
        local.saturating_add(from_parent)
    }

    /// Adds `amount` of `fr` to `node` and the part beyond each level's
    /// guaranteed quota to its ancestors.
    pub fn charge(&self, usage: &mut Usage, node: NodeId, fr: FrId, amount: u64) {
        let mut node = node;
        let mut delta = amount;
        loop {
            let guaranteed = self.nodes[node].guaranteed[fr];
            let slot = usage.slot(node, fr);
            let before = slot.saturating_sub(guaranteed);
            *slot = slot.saturating_add(delta);
            let after = slot.saturating_sub(guaranteed);
            delta = after - before;
            match self.nodes[node].parent {
                Some(p) if delta > 0 => node = p,
                _ => return,
            }
        }
    }

    /// Removes `amount` of `fr` from `node`, mirroring [`QuotaTree::charge`].
    pub fn release(&self, usage: &mut Usage, node: NodeId, fr: FrId, amount: u64) {
        let mut node = node;
        let mut delta = amount;
        loop {
            let guaranteed = self.nodes[node].guaranteed[fr];
            let slot = usage.slot(node, fr);
            let before = slot.saturating_sub(guaranteed);
            *slot = slot.saturating_sub(delta);
            let after = slot.saturating_sub(guaranteed);
            delta = before - after;
            match self.nodes[node].parent {
                Some(p) if delta > 0 => node = p,
                _ => return,
            }
        }
    }

    /// Nominal quota of `node` in `fr` (0 without a quota line).
    pub fn nominal(&self, node: NodeId, fr: FrId) -> u64 {
        self.nodes[node].limits[fr]
            .as_ref()
            .map_or(0, |l| l.nominal)
    }

    /// Whether `node` uses more of `fr` than its own subtree holds.
    pub fn is_borrowing(&self, usage: &Usage, node: NodeId, fr: FrId) -> bool {
        usage.get(node, fr) > self.nodes[node].subtree_quota[fr]
    }

    /// Every limit that `usage` breaks, as human-readable lines; empty when
    /// all of invariant 1 holds for the tree.
    pub fn violations(&self, usage: &Usage) -> Vec<String> {
        let mut out = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            for fr in 0..self.cells.len() {
                let used = usage.get(id, fr);
                if node.parent.is_none() && used > node.subtree_quota[fr] {
                    out.push(format!(
                        "{} {:?} uses {} of {} but holds {}",
                        kind_name(node.kind),
                        node.name,
                        Quantity::from_milli(used),
                        self.cells[fr],
                        Quantity::from_milli(node.subtree_quota[fr])
                    ));
                }
                if let Some(limit) = node.limits[fr].as_ref().and_then(|l| l.borrowing_limit) {
                    let max = node.subtree_quota[fr].saturating_add(limit);
                    if used > max {
                        out.push(format!(
                            "{} {:?} uses {} of {}, above nominal + borrowingLimit {}",
                            kind_name(node.kind),
                            node.name,
                            Quantity::from_milli(used),
                            self.cells[fr],
                            Quantity::from_milli(max)
                        ));
                    }
                }
            }
        }
        // A parent's usage must fit in its subtree quota plus what it can
        // borrow; checked through the roots above, and for lending limits:
        for (id, node) in self.nodes.iter().enumerate() {
            for fr in 0..self.cells.len() {
                let lent_out: u64 = node
                    .children
                    .iter()
                    .map(|&c| {
                        usage
                            .get(c, fr)
                            .saturating_sub(self.nodes[c].guaranteed[fr])
                    })
                    .fold(0u64, u64::saturating_add);
                if node.kind == NodeKind::Cohort && usage.get(id, fr) != lent_out {
                    out.push(format!(
                        "cohort {:?} usage of {} is {} but its children use {} beyond their guarantees",
                        node.name,
                        self.cells[fr],
                        Quantity::from_milli(usage.get(id, fr)),
                        Quantity::from_milli(lent_out)
                    ));
                }
            }
        }
        out
    }
}

fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::ClusterQueue => "ClusterQueue",
        NodeKind::Cohort => "cohort",
    }
}
