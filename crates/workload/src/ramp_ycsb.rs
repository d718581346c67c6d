//! The `ramp-ycsb` workload: the YCSB variant of "Scalable Atomic
//! Visibility with RAMP Transactions" and of the NOC-NOC paper: read-only
//! and write-only transactions of `txn_size` distinct keys (4 by default;
//! the papers sweep 4 to 128) drawn by Zipf θ over `keys` keys;
//! `read_txn_pct` of them read-only (label `read-only`), the rest blind
//! writes of `value_bytes`-byte values (label `write-only`).

use crate::spec::{SpecError, WorkloadSpec};
use crate::zipf::Zipf;
use crate::{Generator, TagSource, Txn};
use meridian_core::{Data, Key, Op, Program, Rng, Value};
use std::sync::Arc;

pub const TXN_SIZE_MAX: u32 = 128;
pub const VALUE_BYTES_MAX: u32 = 65_536;

/// The resolved `[workload]` of kind `ramp-ycsb`.
#[derive(Clone, Debug, PartialEq)]
pub struct RampYcsbSpec {
    pub keys: u64,
    pub zipf: f64,
    pub txn_size: u32,
    pub read_txn_pct: f64,
    pub value_bytes: u32,
}

impl RampYcsbSpec {
    pub fn of(spec: &WorkloadSpec) -> RampYcsbSpec {
        RampYcsbSpec {
            keys: spec.keys.unwrap_or(1_000_000),
            zipf: spec.zipf.unwrap_or(0.99),
            txn_size: spec.txn_size.unwrap_or(4),
            read_txn_pct: spec.read_txn_pct.unwrap_or(95.0),
            value_bytes: spec.value_bytes.unwrap_or(1),
        }
    }
}

fn err(field: &'static str, message: String) -> Result<(), SpecError> {
    Err(SpecError { field, message })
}

pub fn check(spec: &WorkloadSpec) -> Result<(), SpecError> {
    let s = RampYcsbSpec::of(spec);
    if !(1..=TXN_SIZE_MAX).contains(&s.txn_size) {
        return err("txn_size", format!("must be between 1 and {TXN_SIZE_MAX}, got {}", s.txn_size));
    }
    if s.keys < u64::from(s.txn_size) || s.keys > u64::MAX / 2 {
        return err("keys", format!("must hold at least txn_size ({}) keys, got {}", s.txn_size, s.keys));
    }
    if !s.zipf.is_finite() || s.zipf < 0.0 {
        return err("zipf", format!("must be a number >= 0 (0 = uniform), got {}", s.zipf));
    }
    if !(0.0..=100.0).contains(&s.read_txn_pct) {
        return err("read_txn_pct", format!("must be a percentage between 0 and 100, got {}", s.read_txn_pct));
    }
    if !(1..=VALUE_BYTES_MAX).contains(&s.value_bytes) {
        return err("value_bytes", format!("must be between 1 and {VALUE_BYTES_MAX}, got {}", s.value_bytes));
    }
    Ok(())
}

pub struct RampYcsb {
    spec: RampYcsbSpec,
    zipf: Zipf,
    payload: Arc<Vec<u8>>,
}

pub fn generator(spec: &WorkloadSpec) -> Result<RampYcsb, String> {
    let s = RampYcsbSpec::of(spec);
    let zipf = Zipf::new(s.keys, s.zipf)?;
    let payload = Arc::new(vec![b'x'; s.value_bytes as usize]);
    Ok(RampYcsb { spec: s, zipf, payload })
}

impl Generator for RampYcsb {
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        let mut keys: Vec<Key> = Vec::with_capacity(self.spec.txn_size as usize);
        while keys.len() < self.spec.txn_size as usize {
            let k = Key(self.zipf.sample(rng));
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if rng.chance(self.spec.read_txn_pct / 100.0) {
            return Txn::new(Program::new(keys.into_iter().map(|key| Op::Read { key }).collect()), "read-only");
        }
        let ops = keys
            .into_iter()
            .map(|key| Op::Write {
                key,
                value: Value { tag: tags.next(), data: Data::Bytes(Arc::clone(&self.payload)) },
            })
            .collect();
        Txn::new(Program::new(ops), "write-only")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            keys: Some(10_000),
            txn_size: Some(8),
            value_bytes: Some(100),
            ..WorkloadSpec::new(crate::WorkloadKind::RampYcsb)
        }
    }

    fn txns(s: &WorkloadSpec, seed: u64, n: usize) -> Vec<Txn> {
        let mut g = generator(s).unwrap();
        let (mut rng, mut tags) = (Rng::new(seed), TagSource::new(0));
        (0..n).map(|_| g.next(&mut rng, &mut tags)).collect()
    }

    #[test]
    fn read_only_and_write_only_transactions_of_distinct_keys_in_the_asked_share() {
        let all = txns(&spec(), 1, 4_000);
        let reads = all.iter().filter(|t| t.label == "read-only").count() as f64 / all.len() as f64;
        assert!((reads - 0.95).abs() < 0.02, "read-only share {reads}");
        for t in &all {
            let mut keys: Vec<Key> = t.program.ops.iter().map(Op::key).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), 8);
            match t.label {
                "read-only" => assert!(t.program.ops.iter().all(|op| matches!(op, Op::Read { .. }))),
                _ => assert!(t.program.ops.iter().all(
                    |op| matches!(op, Op::Write { value, .. } if matches!(&value.data, Data::Bytes(b) if b.len() == 100))
                )),
            }
        }
        assert_eq!(txns(&spec(), 1, 20), txns(&spec(), 1, 20));
        assert_ne!(txns(&spec(), 1, 20), txns(&spec(), 2, 20));
    }

    #[test]
    fn bad_fields_are_named() {
        let cases: [(WorkloadSpec, &str); 4] = [
            (WorkloadSpec { txn_size: Some(129), ..spec() }, "txn_size"),
            (WorkloadSpec { keys: Some(3), ..spec() }, "keys"),
            (WorkloadSpec { read_txn_pct: Some(-1.0), ..spec() }, "read_txn_pct"),
            (WorkloadSpec { value_bytes: Some(0), ..spec() }, "value_bytes"),
        ];
        for (s, field) in cases {
            assert_eq!(s.check(3).unwrap_err().field, field);
        }
    }
}
