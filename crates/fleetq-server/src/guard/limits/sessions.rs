//! How many agents may hold a session with a node at once.
//!
//! A session names its cluster only in its first message, so a slot is
//! taken in two steps: [`SessionSlots::open`] when the stream opens (at
//! most `limit` streams may wait to name their cluster), then
//! [`SessionSlot::name`] at the first message (at most `limit` distinct
//! clusters). A further session of a cluster that already has one is
//! always let in: an agent that reconnects opens its new session before
//! the server notices that the old one is gone. A slot is given back when
//! it is dropped (the session ended).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct SessionSlots {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Sessions open that have not named their cluster yet.
    unnamed: usize,
    /// Open sessions per cluster.
    clusters: HashMap<String, usize>,
}

/// One open session's place; dropping it gives the place back.
#[derive(Debug)]
pub struct SessionSlot {
    slots: Arc<SessionSlots>,
    cluster: Option<String>,
}

impl SessionSlots {
    pub fn new(limit: usize) -> Arc<SessionSlots> {
        Arc::new(SessionSlots {
            limit,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a session that just opened, or why there is none.
    pub fn open(self: &Arc<Self>) -> Result<SessionSlot, String> {
        let mut state = self.state();
        if state.unnamed >= self.limit {
            return Err(format!(
                "agent sessions: {} sessions are open that have not named their cluster yet; the limit is {} (max_agent_sessions); retry later",
                state.unnamed, self.limit
            ));
        }
        state.unnamed += 1;
        Ok(SessionSlot {
            slots: Arc::clone(self),
            cluster: None,
        })
    }

    /// Clusters with at least one session open.
    pub fn clusters(&self) -> usize {
        self.state().clusters.len()
    }
}

impl SessionSlot {
    /// The session's first message named `cluster`: counts it, or refuses
    /// it when `limit` other clusters hold sessions already.
    pub fn name(&mut self, cluster: &str) -> Result<(), String> {
        if self.cluster.is_some() {
            return Ok(());
        }
        let slots = Arc::clone(&self.slots);
        let mut state = slots.state();
        let known = state.clusters.contains_key(cluster);
        if !known && state.clusters.len() >= slots.limit {
            return Err(format!(
                "agent sessions: the limit of {} clusters with a session to this node is reached (max_agent_sessions); cluster {cluster:?} is refused, retry later",
                slots.limit
            ));
        }
        state.unnamed = state.unnamed.saturating_sub(1);
        *state.clusters.entry(cluster.to_string()).or_default() += 1;
        self.cluster = Some(cluster.to_string());
        Ok(())
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut state = self.slots.state();
        match self.cluster.take() {
            None => state.unnamed = state.unnamed.saturating_sub(1),
            Some(c) => {
                if let Some(n) = state.clusters.get_mut(&c) {
                    *n -= 1;
                    if *n == 0 {
                        state.clusters.remove(&c);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_limit_clusters_but_a_reconnect_is_let_in() {
        let slots = SessionSlots::new(2);
        let mut a = slots.open().expect("room");
        a.name("a").expect("first cluster");
        let mut b = slots.open().expect("room");
        b.name("b").expect("second cluster");
        // A third cluster is refused, naming the setting and the cluster.
        let mut c = slots.open().expect("it may open");
        let e = c.name("c").expect_err("a third cluster");
        assert!(e.contains("max_agent_sessions"), "{e}");
        assert!(e.contains("\"c\""), "{e}");
        drop(c);
        // Cluster a reconnects before its old session ended.
        let mut a2 = slots.open().expect("room");
        a2.name("a").expect("a second session of a known cluster");
        assert_eq!(slots.clusters(), 2);
        // The old session ends: a still counts once, through a2.
        drop(a);
        assert_eq!(slots.clusters(), 2);
        let mut c = slots.open().expect("room");
        assert!(c.name("c").is_err());
        drop(c);
        // b leaves: now c fits.
        drop(b);
        let mut c = slots.open().expect("room");
        c.name("c").expect("a place is free");
        drop((a2, c));
        assert_eq!(slots.clusters(), 0);
    }

    #[test]
    fn unnamed_sessions_are_bounded_too() {
        let slots = SessionSlots::new(2);
        let first = slots.open().expect("room");
        let _second = slots.open().expect("room");
        let e = slots.open().expect_err("two wait already");
        assert!(e.contains("max_agent_sessions"), "{e}");
        drop(first);
        let mut third = slots.open().expect("a place was given back");
        third.name("x").expect("named");
        // Naming frees the unnamed place.
        let _fourth = slots.open().expect("room");
    }
}
