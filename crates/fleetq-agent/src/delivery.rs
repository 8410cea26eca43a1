//! Status reports kept until the leader has provably written them.
//!
//! A report handed to a session's stream is not yet delivered: when the
//! connection dies (a lossy link blackholes it until keep-alive gives up)
//! everything still in its buffers is lost, and the ledger never hears
//! that an admission ran or ended. The admission then stays `Admitted`
//! for good: a reconcile leaves alone what was never reported running,
//! and the agent, which already ran it, does not start it twice (the
//! live chaos run found one so, stranded with its GPUs charged).
//!
//! The proof of delivery is an acknowledged heartbeat: the leader reads
//! a session's messages in order and writes each report to Raft before
//! it reads the next message, so an ack for a heartbeat sent after a
//! report means that report is in the ledger. Whatever a session handed
//! over without such an ack goes out again, first, in the next session
//! (every report is idempotent upstream: a repeat or a stale epoch is a
//! no-op).
//!
//! ```
//! use fleetq_agent::delivery::ReportDelivery;
//! use fleetq_agent::executor::{Event, Report};
//!
//! let mut d = ReportDelivery::default();
//! d.queue(Report { workload: 1, epoch: 1, event: Event::Running, message: String::new() });
//! d.hand_over_while(|_| true);
//! d.session_ended(); // no ack came: the report goes out again
//! let mut again = Vec::new();
//! d.hand_over_while(|r| { again.push(r.workload); true });
//! assert_eq!(again, [1]);
//! ```

use std::collections::VecDeque;

use crate::executor::Report;

/// Heartbeats remembered per session while waiting for their acks; the
/// oldest are forgotten beyond this (a later ack confirms as much).
const MAX_BEATS: usize = 4096;

#[derive(Debug, Default)]
pub struct ReportDelivery {
    /// Not yet handed to a session, oldest first.
    outbox: VecDeque<Report>,
    /// Handed to the current session, not yet confirmed, with their
    /// sequence numbers.
    in_flight: VecDeque<(u64, Report)>,
    /// This session's heartbeats awaiting an ack: their stamp, and how
    /// many reports had been handed over when each was sent.
    beats: VecDeque<(u64, u64)>,
    /// Reports handed over so far (the next one's sequence number).
    handed: u64,
}

impl ReportDelivery {
    /// A new report from the executor.
    pub fn queue(&mut self, report: Report) {
        self.outbox.push_back(report);
    }

    /// Hands queued reports to the session, oldest first, while `send`
    /// takes them; each taken is in flight until confirmed. The first one
    /// `send` refuses (the stream is full) stays first in line.
    pub fn hand_over_while(&mut self, mut send: impl FnMut(&Report) -> bool) {
        while let Some(report) = self.outbox.front() {
            if !send(report) {
                break;
            }
            if let Some(report) = self.outbox.pop_front() {
                self.in_flight.push_back((self.handed, report));
                self.handed += 1;
            }
        }
    }

    /// A heartbeat stamped `stamp` is in the session's stream, after
    /// every report handed over so far.
    pub fn beat_sent(&mut self, stamp: u64) {
        if self.beats.len() == MAX_BEATS {
            self.beats.pop_front();
        }
        self.beats.push_back((stamp, self.handed));
    }

    /// The leader acknowledged the heartbeat stamped `stamp`: every report
    /// handed over before it is written. Two heartbeats may share a stamp
    /// (the same millisecond); the earlier one counts, which confirms no
    /// more than certainly arrived.
    pub fn acked(&mut self, stamp: u64) {
        let Some(at) = self.beats.iter().position(|(s, _)| *s == stamp) else {
            return; // an older server's ack (no echo), or a beat forgotten
        };
        let (_, before) = self.beats[at];
        self.beats.drain(..=at);
        while self.in_flight.front().is_some_and(|(seq, _)| *seq < before) {
            self.in_flight.pop_front();
        }
    }

    /// The session ended: what it did not confirm goes out again first.
    pub fn session_ended(&mut self) {
        self.beats.clear();
        for (_, report) in self.in_flight.drain(..).rev() {
            self.outbox.push_front(report);
        }
    }

    /// Reports not yet known to be written (queued or in flight).
    pub fn undelivered(&self) -> usize {
        self.outbox.len() + self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Event;

    fn report(workload: u64, event: Event) -> Report {
        Report {
            workload,
            epoch: 1,
            event,
            message: String::new(),
        }
    }

    fn send_all(d: &mut ReportDelivery) -> Vec<u64> {
        let mut sent = Vec::new();
        d.hand_over_while(|r| {
            sent.push(r.workload);
            true
        });
        sent
    }

    #[test]
    fn what_a_dead_session_did_not_confirm_goes_out_again_in_order() {
        let mut d = ReportDelivery::default();
        d.queue(report(1, Event::Running));
        d.queue(report(1, Event::Succeeded));
        d.queue(report(2, Event::Running));
        assert_eq!(send_all(&mut d), vec![1, 1, 2]);
        d.beat_sent(10);
        d.queue(report(3, Event::Running));
        d.session_ended();
        // The in-flight ones first, then the one never handed over.
        assert_eq!(send_all(&mut d), vec![1, 1, 2, 3]);
        let again: Vec<Event> = d.in_flight.iter().map(|(_, r)| r.event).collect();
        assert_eq!(
            again,
            vec![
                Event::Running,
                Event::Succeeded,
                Event::Running,
                Event::Running
            ]
        );
    }

    #[test]
    fn an_ack_confirms_only_what_was_sent_before_its_heartbeat() {
        let mut d = ReportDelivery::default();
        d.queue(report(1, Event::Running));
        send_all(&mut d);
        d.beat_sent(10);
        d.queue(report(2, Event::Running));
        send_all(&mut d);
        d.beat_sent(20);
        d.acked(10);
        assert_eq!(d.undelivered(), 1);
        d.session_ended();
        assert_eq!(send_all(&mut d), vec![2]);
        // In the new session, an ack for a beat of the old one confirms
        // nothing.
        d.acked(20);
        assert_eq!(d.undelivered(), 1);
        d.beat_sent(30);
        d.acked(30);
        assert_eq!(d.undelivered(), 0);
    }

    #[test]
    fn beats_sharing_a_stamp_confirm_what_preceded_the_first() {
        let mut d = ReportDelivery::default();
        d.beat_sent(5);
        d.queue(report(1, Event::Running));
        send_all(&mut d);
        d.beat_sent(5);
        d.acked(5);
        assert_eq!(d.undelivered(), 1, "the report after the first beat");
        d.acked(5); // the second beat's ack
        assert_eq!(d.undelivered(), 0);
    }

    #[test]
    fn an_unknown_stamp_confirms_nothing() {
        let mut d = ReportDelivery::default();
        d.queue(report(1, Event::Running));
        send_all(&mut d);
        d.beat_sent(7);
        d.acked(0);
        d.acked(8);
        assert_eq!(d.undelivered(), 1);
    }

    #[test]
    fn a_report_that_did_not_fit_stays_first() {
        let mut d = ReportDelivery::default();
        d.queue(report(1, Event::Running));
        d.queue(report(2, Event::Running));
        let mut room = 1;
        d.hand_over_while(|_| {
            room -= 1;
            room >= 0
        });
        assert_eq!(d.in_flight.len(), 1);
        assert_eq!(send_all(&mut d), vec![2]);
    }
}
