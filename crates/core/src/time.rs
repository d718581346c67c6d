//! Time as protocols see it: nanoseconds on the node's own clock.
//!
//! Instants and durations are plain `u64` nanoseconds, with the unit last in
//! every name (`clock_ns`, `delay_ns`). A node's wall clock may be offset,
//! drift and jump; timers run on its monotonic clock, which drifts but never
//! jumps. [`TrueTime`] is the bounded-uncertainty interval of Spanner's
//! TrueTime API, the true time is always inside it.

use serde::{Deserialize, Serialize};

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Milliseconds (fractional) to nanoseconds, rounding to the nearest ns and
/// clamping negative values to zero.
pub fn ms_to_ns(ms: f64) -> u64 {
    if ms <= 0.0 { 0 } else { (ms * NS_PER_MS as f64).round() as u64 }
}

/// Microseconds (fractional) to nanoseconds, clamping negative values to zero.
pub fn us_to_ns(us: f64) -> u64 {
    if us <= 0.0 { 0 } else { (us * NS_PER_US as f64).round() as u64 }
}

/// Nanoseconds to fractional milliseconds, for reports.
pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS as f64
}

/// A TrueTime reading: the true time lies in `[earliest_ns, latest_ns]`.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TrueTime {
    pub earliest_ns: u64,
    pub latest_ns: u64,
}

impl TrueTime {
    /// True when `t_ns` has certainly passed (TrueTime's `after`).
    pub fn after(&self, t_ns: u64) -> bool {
        self.earliest_ns > t_ns
    }

    /// True when `t_ns` has certainly not arrived (TrueTime's `before`).
    pub fn before(&self, t_ns: u64) -> bool {
        self.latest_ns < t_ns
    }

    pub fn width_ns(&self) -> u64 {
        self.latest_ns - self.earliest_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_and_clamp() {
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(-3.0), 0);
        assert_eq!(us_to_ns(0.4), 400);
        assert!((ns_to_ms(2_500_000) - 2.5).abs() < 1e-12);
    }

    #[test]
    fn truetime_after_and_before_are_strict() {
        let tt = TrueTime { earliest_ns: 10, latest_ns: 20 };
        assert!(tt.after(9));
        assert!(!tt.after(10));
        assert!(tt.before(21));
        assert!(!tt.before(20));
        assert_eq!(tt.width_ns(), 10);
    }
}
