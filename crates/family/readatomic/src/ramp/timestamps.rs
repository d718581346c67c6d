//! A RAMP client's timestamps: unique across clients (the client's index
//! in the low bits, `Ts`), and increasing on one client across its
//! restarts — a session that writes a key twice must read its second
//! write, and partitions expose the larger timestamp (Algorithm 1 line 8),
//! so a restarted client whose clock went back must not write below what
//! it wrote before the crash.
//!
//! The client reserves time ahead durably: it issues timestamps only below
//! a reservation (`Record::Reserved`) already durable, and a restart
//! starts above the largest reservation recorded. A reservation reaches
//! `reserve_ahead_ms` past the clock; a new one is recorded when half of
//! it is used, so issuing seldom waits.

use super::messages::Ts;
use meridian_core::{Env, Lsn};

pub struct TsSource {
    client: u32,
    /// Every timestamp issued is above this time (µs).
    last_us: u64,
    /// Durable: no timestamp at or above it was issued.
    reserved_us: u64,
    /// A reservation appended and not yet durable: its LSN and time.
    recording: Option<(Lsn, u64)>,
    ahead_us: u64,
}

impl TsSource {
    /// Starts above every reservation recorded before.
    pub fn start(client: u32, recorded_us: impl IntoIterator<Item = u64>, ahead_us: u64) -> TsSource {
        assert!(ahead_us > 1, "a reservation covers some time");
        let floor = recorded_us.into_iter().max().unwrap_or(0);
        TsSource { client, last_us: floor, reserved_us: floor, recording: None, ahead_us }
    }

    /// The next timestamp at clock `clock_us`, if it is below the durable
    /// reservation.
    pub fn next(&mut self, clock_us: u64) -> Option<Ts> {
        let t = clock_us.max(self.last_us + 1);
        if t >= self.reserved_us {
            return None;
        }
        self.last_us = t;
        Some(Ts::new(t, self.client))
    }

    /// A reservation to record now, if none is being recorded and less
    /// than half of the current one is left at `clock_us`.
    pub fn to_reserve(&self, clock_us: u64) -> Option<u64> {
        let from = clock_us.max(self.last_us);
        let short = self.reserved_us.saturating_sub(from) < self.ahead_us / 2;
        (self.recording.is_none() && short).then_some(from + self.ahead_us)
    }

    /// Appends the reservation `to_reserve` asks for at `clock_us`, if any,
    /// as the protocol's `record` of it (every client of RAMP's timestamps:
    /// RAMP's, LORA's, RA-NOC2's, Eiger's).
    pub fn reserve<M, R, T>(&mut self, ctx: &mut dyn Env<M, R, T>, clock_us: u64, record: impl FnOnce(u64) -> R) {
        if let Some(upto_us) = self.to_reserve(clock_us) {
            let lsn = ctx.append(record(upto_us));
            self.recording(lsn, upto_us);
        }
    }

    /// The reservation `upto_us` was appended at `lsn`.
    pub fn recording(&mut self, lsn: Lsn, upto_us: u64) {
        assert!(self.recording.is_none(), "one reservation at a time");
        self.recording = Some((lsn, upto_us));
    }

    /// Appends up to `upto` are durable; true if a reservation became so.
    pub fn persisted(&mut self, upto: Lsn) -> bool {
        match self.recording {
            Some((lsn, upto_us)) if lsn <= upto => {
                self.recording = None;
                self.reserved_us = self.reserved_us.max(upto_us);
                true
            }
            _ => false,
        }
    }

    /// The durable reservation: no timestamp at or above it was issued.
    pub fn reserved_us(&self) -> u64 {
        self.reserved_us
    }

    pub fn check_invariants(&self) {
        assert!(self.last_us <= self.reserved_us, "issued only below a durable reservation");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_issued_before_a_reservation_is_durable() {
        let mut s = TsSource::start(3, [], 1_000);
        assert_eq!(s.next(10), None);
        let upto = s.to_reserve(10).unwrap();
        assert_eq!(upto, 1_010);
        s.recording(Lsn(1), upto);
        assert_eq!(s.to_reserve(10), None, "one at a time");
        assert!(s.persisted(Lsn(1)));
        let a = s.next(10).unwrap();
        assert_eq!(a, Ts::new(10, 3));
        assert!(s.next(10).unwrap() > a, "increasing even on one clock reading");
    }

    #[test]
    fn a_restarted_client_whose_clock_went_back_still_issues_above_what_it_issued() {
        let mut s = TsSource::start(3, [], 1_000);
        s.recording(Lsn(1), s.to_reserve(5_000).unwrap());
        s.persisted(Lsn(1));
        let before = s.next(5_000).unwrap();
        // Restart with the clock a second behind.
        let mut s = TsSource::start(3, [6_000], 1_000);
        assert_eq!(s.next(4_000), None);
        s.recording(Lsn(2), s.to_reserve(4_000).unwrap());
        s.persisted(Lsn(2));
        assert!(s.next(4_000).unwrap() > before);
    }

    #[test]
    fn a_new_reservation_is_asked_for_when_half_is_used() {
        let mut s = TsSource::start(0, [], 1_000);
        s.recording(Lsn(1), s.to_reserve(0).unwrap());
        s.persisted(Lsn(1));
        assert_eq!(s.to_reserve(400), None);
        assert_eq!(s.to_reserve(600), Some(1_600));
    }
}
