//! A node's simulated durable log with group commit and named streams.
//!
//! Appends wait until a flush covering them completes (one flush in flight
//! at a time; appends made meanwhile go in the next). Only flushed records
//! survive a crash. LSNs are one sequence over every stream; a compaction
//! replaces one stream's durable records up to an LSN by that stream's
//! snapshot once flushed, leaving the other streams' records alone.
//!
//! Records stay where they were appended: one deque in LSN order holds the
//! durable ones and, behind them, those awaiting a flush, so a flush that
//! completes moves no record, it only raises the durable LSN. A node
//! appends on most events, and moving each record from a pending list to
//! the durable one cost the simulator more than the append itself. The
//! deque grows by blocks ([`BlockDeque`]): the records between two
//! compactions grow with the state a checkpoint holds, and a doubling
//! buffer would copy them all into fresh memory each time it grew.

use crate::block_deque::BlockDeque;
use meridian_core::{Lsn, Stream};
use std::collections::BTreeMap;

/// A compaction queued but not yet flushed.
struct Compaction<R> {
    stream: Stream,
    upto: Lsn,
    snapshot: R,
}

pub struct Disk<R> {
    snapshots: BTreeMap<Stream, R>,
    /// Every record appended and not compacted away, in LSN order: those
    /// up to `durable_upto` are durable, the rest wait for a flush.
    log: BlockDeque<(Lsn, Stream, R)>,
    /// Compactions waiting for a flush, in the order queued.
    compactions: Vec<Compaction<R>>,
    next_lsn: u64,
    /// LSN the in-flight flush will cover, if one is in flight.
    flushing_upto: Option<Lsn>,
    /// How many queued compactions the in-flight flush covers.
    flushing_compactions: usize,
    /// Highest LSN ever made durable: LSNs continue after it on restart.
    durable_upto: u64,
    /// Every stream ever appended to, a bit each (streams from 63 on share
    /// the last): a compaction of the only one drops a prefix it finds by
    /// LSN alone.
    streams: u64,
}

impl<R: Clone> Disk<R> {
    pub fn new() -> Disk<R> {
        Disk {
            snapshots: BTreeMap::new(),
            log: BlockDeque::new(),
            compactions: Vec::new(),
            next_lsn: 1,
            flushing_upto: None,
            flushing_compactions: 0,
            durable_upto: 0,
            streams: 0,
        }
    }

    /// The LSN the next append gets.
    pub fn next_lsn(&self) -> Lsn {
        Lsn(self.next_lsn)
    }

    /// Queues a record on `stream`; returns its LSN and whether no flush is
    /// in flight.
    pub fn append(&mut self, stream: Stream, record: R) -> (Lsn, bool) {
        let lsn = Lsn(self.next_lsn);
        self.next_lsn += 1;
        self.log.push_back((lsn, stream, record));
        self.streams |= stream_bit(stream);
        (lsn, self.flushing_upto.is_none())
    }

    /// Queues a compaction of `stream`; returns whether a flush must be
    /// started.
    pub fn compact(&mut self, stream: Stream, upto: Lsn, snapshot: R) -> bool {
        assert!(upto.0 < self.next_lsn, "compaction past the last appended record");
        self.compactions.push(Compaction { stream, upto, snapshot });
        self.flushing_upto.is_none()
    }

    /// Whether anything waits for a flush besides what is durable up to
    /// `covered`: appends past it, or compactions (none in flight when
    /// asked).
    fn pending_past(&self, covered: u64) -> bool {
        self.next_lsn - 1 > covered || !self.compactions.is_empty()
    }

    /// Starts a flush of everything pending; false if there is nothing to do
    /// or one is already in flight.
    pub fn start_flush(&mut self) -> bool {
        if self.flushing_upto.is_some() || !self.pending_past(self.durable_upto) {
            return false;
        }
        self.flushing_upto = Some(Lsn(self.next_lsn - 1));
        self.flushing_compactions = self.compactions.len();
        true
    }

    /// The in-flight flush completed: its records are durable. Returns the LSN
    /// now durable, and whether more is pending (another flush is due).
    pub fn complete_flush(&mut self) -> (Lsn, bool) {
        let upto = self.flushing_upto.take().expect("a flush was in flight");
        self.durable_upto = upto.0;
        // A compaction drops only records appended before it was queued
        // (its LSN bound is below the next LSN then), all of them covered
        // by this flush or an earlier one: applying the flush's appends
        // first and its compactions after them, in order, keeps what
        // applying them interleaved would.
        for c in self.compactions.drain(..self.flushing_compactions) {
            let only = holds_only(self.streams, c.stream);
            drop_compacted(&mut self.log, c.stream, c.upto, only);
            self.snapshots.insert(c.stream, c.snapshot);
        }
        self.flushing_compactions = 0;
        (upto, self.pending_past(upto.0))
    }

    /// A crash: everything not flushed is gone (including an in-flight flush).
    pub fn crash(&mut self) {
        let durable = self.log.partition_point(|(l, _, _)| l.0 <= self.durable_upto);
        self.log.truncate(durable);
        self.compactions.clear();
        self.flushing_upto = None;
        self.flushing_compactions = 0;
        self.next_lsn = self.durable_upto + 1;
    }

    /// The durable records a restarted node recovers: every stream's
    /// snapshot (in stream order), then the records in LSN order.
    pub fn recover(&self) -> Vec<R> {
        let durable = self.log.iter().take_while(|(l, _, _)| l.0 <= self.durable_upto);
        self.snapshots.values().cloned().chain(durable.map(|(_, _, r)| r.clone())).collect()
    }
}

/// Drops `stream`'s records up to `upto` (durable by then: records past
/// the durable LSN are later than any compaction flushed). Records are in
/// LSN order, so only those before the first past `upto` can go; when they are
/// a prefix (a node with one stream, or the others' records all later) they
/// leave from the front, without the pass over every record `retain` makes,
/// which moves each one kept — a whole checkpoint interval's records per
/// compaction.
/// `only`: every record is `stream`'s, so the prefix is found by LSN alone,
/// without a pass over it.
fn drop_compacted<R>(durable: &mut BlockDeque<(Lsn, Stream, R)>, stream: Stream, upto: Lsn, only: bool) {
    debug_assert!(durable.iter().zip(durable.iter().skip(1)).all(|(a, b)| a.0 < b.0), "durable records in LSN order");
    debug_assert!(!only || durable.iter().all(|(_, s, _)| *s == stream), "another stream's record");
    // Dropped in one piece: one at a time, each would be moved out first.
    let prefix = if only {
        durable.partition_point(|(l, _, _)| *l <= upto)
    } else {
        durable.iter().take_while(|(l, s, _)| *s == stream && *l <= upto).count()
    };
    durable.drop_front(prefix);
    let candidates = durable.partition_point(|(l, _, _)| *l <= upto);
    if durable.iter().take(candidates).any(|(_, s, _)| *s == stream) {
        durable.retain(|(l, s, _)| *s != stream || *l > upto);
    }
}

/// The bit of `stream` in `Disk::streams`; streams from 63 on share the
/// last, which therefore never proves a stream alone.
fn stream_bit(stream: Stream) -> u64 {
    1 << stream.0.min(63)
}

/// Whether every record ever appended to a disk whose `Disk::streams` is
/// `streams` is `stream`'s.
fn holds_only(streams: u64, stream: Stream) -> bool {
    stream.0 < 63 && streams & !stream_bit(stream) == 0
}

impl<R: Clone> Default for Disk<R> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: Stream = Stream::MAIN;
    const OTHER: Stream = Stream(1);

    #[test]
    fn only_flushed_records_survive_a_crash() {
        let mut d = Disk::new();
        let (l1, start) = d.append(MAIN, "a");
        assert!(start && d.start_flush());
        let (l2, start) = d.append(MAIN, "b");
        assert!(!start, "a flush is in flight: b waits for the next one");
        assert_eq!((l1, l2), (Lsn(1), Lsn(2)));
        let (upto, more) = d.complete_flush();
        assert_eq!(upto, Lsn(1));
        assert!(more);
        d.crash();
        assert_eq!(d.recover(), vec!["a"]);
        let (l3, _) = d.append(MAIN, "c");
        assert_eq!(l3, Lsn(2), "LSNs continue after the last durable record");
    }

    #[test]
    fn compaction_replaces_the_prefix_once_flushed() {
        let mut d = Disk::new();
        for r in ["a", "b", "c"] {
            d.append(MAIN, r);
        }
        d.start_flush();
        d.complete_flush();
        d.compact(MAIN, Lsn(2), "snap");
        assert_eq!(d.recover(), vec!["a", "b", "c"], "not flushed yet");
        d.start_flush();
        d.complete_flush();
        assert_eq!(d.recover(), vec!["snap", "c"]);
        d.crash();
        assert_eq!(d.append(MAIN, "d").0, Lsn(4));
    }

    #[test]
    fn a_compaction_queued_during_a_flush_waits_for_the_next_one() {
        let mut d = Disk::new();
        d.append(MAIN, "a");
        d.append(MAIN, "b");
        assert!(d.start_flush());
        assert!(!d.compact(MAIN, Lsn(1), "snap"), "a flush is in flight");
        d.append(MAIN, "c");
        let (upto, more) = d.complete_flush();
        assert_eq!((upto, more), (Lsn(2), true));
        assert_eq!(d.recover(), vec!["a", "b"], "the compaction and c wait");
        d.crash();
        assert_eq!(d.recover(), vec!["a", "b"], "neither was flushed");
        assert_eq!(d.append(MAIN, "c2").0, Lsn(3));
        d.compact(MAIN, Lsn(2), "snap2");
        assert!(d.start_flush());
        assert_eq!(d.complete_flush(), (Lsn(3), false));
        assert_eq!(d.recover(), vec!["snap2", "c2"]);
    }

    #[test]
    fn compaction_drops_exactly_the_stream_records_up_to_its_lsn() {
        // Against the plain filter, on interleavings that make the dropped
        // records a prefix, a prefix and a tail of other streams, or scattered.
        let cases: [&[u16]; 5] = [&[0, 0, 0, 0], &[0, 0, 1, 1], &[1, 0, 0, 1, 0], &[0, 1, 0, 1, 0, 0], &[1, 1, 1]];
        for streams in cases {
            for upto in 0..=streams.len() as u64 + 1 {
                let log: Vec<(Lsn, Stream, u64)> =
                    streams.iter().enumerate().map(|(i, s)| (Lsn(i as u64 + 1), Stream(*s), i as u64)).collect();
                let kept: Vec<_> = log.iter().copied().filter(|(l, s, _)| *s != MAIN || l.0 > upto).collect();
                let only_main = streams.iter().all(|s| *s == MAIN.0);
                for only in [false, only_main] {
                    let mut fast: BlockDeque<_> = log.iter().copied().collect();
                    drop_compacted(&mut fast, MAIN, Lsn(upto), only);
                    let fast: Vec<_> = fast.iter().copied().collect();
                    assert_eq!(fast, kept, "streams {streams:?} compacted up to {upto} (one stream known: {only})");
                }
            }
        }
    }

    #[test]
    fn streams_that_share_the_last_bit_are_never_taken_for_one() {
        let (high, higher) = (Stream(63), Stream(70));
        let mut d = Disk::new();
        for (s, r) in [(high, "h1"), (higher, "x1"), (high, "h2"), (higher, "x2")] {
            d.append(s, r);
        }
        assert!(!holds_only(d.streams, high) && !holds_only(d.streams, higher), "63 and 70 share a bit");
        d.compact(high, Lsn(3), "h-snap");
        d.start_flush();
        d.complete_flush();
        assert_eq!(d.recover(), vec!["h-snap", "x1", "x2"], "the other stream's records stay");
        let mut alone = Disk::new();
        alone.append(OTHER, "o");
        assert!(holds_only(alone.streams, OTHER) && !holds_only(alone.streams, MAIN));
    }

    #[test]
    fn compacting_one_stream_keeps_every_record_of_the_others() {
        let mut d = Disk::new();
        for (s, r) in [(MAIN, "m1"), (OTHER, "o1"), (MAIN, "m2"), (OTHER, "o2"), (MAIN, "m3")] {
            d.append(s, r);
        }
        d.compact(OTHER, Lsn(4), "o-snap");
        d.start_flush();
        d.complete_flush();
        assert_eq!(d.recover(), vec!["o-snap", "m1", "m2", "m3"]);
        d.compact(MAIN, Lsn(3), "m-snap");
        d.append(OTHER, "o3");
        d.start_flush();
        d.complete_flush();
        d.crash();
        assert_eq!(d.recover(), vec!["m-snap", "o-snap", "m3", "o3"], "snapshots in stream order, then the rest");
    }
}
