//! The `[workload]` section: which transactions clients run, with per-kind
//! defaults and validation against the cluster's shard count.
//!
//! Fields left out take the defaults of their kind (see
//! [`WorkloadSpec::keys_per_shard`] and friends); [`WorkloadSpec::check`]
//! rejects combinations that cannot be generated and names the field.

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use std::fmt;

/// The workload kinds of CONTRACT.md.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Tiga §5.1: increments of keys on distinct shards.
    #[default]
    Microbench,
    /// YCSB+T: reads and read-modify-write increments.
    YcsbT,
    /// Elle's list-append: appends and whole-list reads on few keys.
    ListAppend,
    /// SLOG's YCSB variant (hot records, multi-home and multi-partition
    /// shares).
    SlogYcsb,
    /// TPC-C's five transactions (see `tpcc.rs`).
    Tpcc,
    /// Retwis (STARRY Table 5's Twitter clone mix).
    Retwis,
    /// RAMP's and NOC-NOC's read-only / write-only YCSB.
    RampYcsb,
}

impl WorkloadKind {
    /// Every kind, implemented or not.
    pub const ALL: [WorkloadKind; 7] = [
        WorkloadKind::Microbench,
        WorkloadKind::YcsbT,
        WorkloadKind::ListAppend,
        WorkloadKind::SlogYcsb,
        WorkloadKind::Tpcc,
        WorkloadKind::Retwis,
        WorkloadKind::RampYcsb,
    ];

    /// The name as written in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Microbench => "microbench",
            WorkloadKind::YcsbT => "ycsb-t",
            WorkloadKind::ListAppend => "list-append",
            WorkloadKind::SlogYcsb => "slog-ycsb",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Retwis => "retwis",
            WorkloadKind::RampYcsb => "ramp-ycsb",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many distinct shards one transaction touches.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ShardsPerTxn {
    /// Exactly this many.
    Fixed(u32),
    /// Drawn uniformly in `[lo, hi]` per transaction.
    Range(u32, u32),
}

impl ShardsPerTxn {
    /// The inclusive bounds `(lo, hi)`.
    pub fn bounds(self) -> (u32, u32) {
        match self {
            ShardsPerTxn::Fixed(k) => (k, k),
            ShardsPerTxn::Range(lo, hi) => (lo, hi),
        }
    }
}

impl fmt::Display for ShardsPerTxn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardsPerTxn::Fixed(k) => write!(f, "{k}"),
            ShardsPerTxn::Range(lo, hi) => write!(f, "[{lo}, {hi}]"),
        }
    }
}

impl<'de> Deserialize<'de> for ShardsPerTxn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShardsPerTxnVisitor)
    }
}

struct ShardsPerTxnVisitor;

const SHARDS_PER_TXN_EXPECTED: &str = "a positive integer or a range [lo, hi] of two positive integers";

fn shard_count<E: de::Error>(v: i64) -> Result<u32, E> {
    u32::try_from(v).map_err(|_| E::custom(format!("{v} is not a valid number of shards")))
}

impl<'de> Visitor<'de> for ShardsPerTxnVisitor {
    type Value = ShardsPerTxn;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SHARDS_PER_TXN_EXPECTED)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ShardsPerTxn, E> {
        shard_count(v).map(ShardsPerTxn::Fixed)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ShardsPerTxn, E> {
        shard_count(i64::try_from(v).unwrap_or(-1)).map(ShardsPerTxn::Fixed)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ShardsPerTxn, A::Error> {
        let lo: Option<i64> = seq.next_element()?;
        let hi: Option<i64> = seq.next_element()?;
        let extra: Option<de::IgnoredAny> = seq.next_element()?;
        match (lo, hi, extra) {
            (Some(lo), Some(hi), None) => Ok(ShardsPerTxn::Range(shard_count(lo)?, shard_count(hi)?)),
            _ => Err(de::Error::custom(format!("expected {SHARDS_PER_TXN_EXPECTED}"))),
        }
    }
}

/// The `[workload]` section. `None` fields take their kind's default.
#[derive(Clone, PartialEq, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Which transactions to generate (default `microbench`).
    #[serde(default)]
    pub kind: WorkloadKind,
    /// Keys on each shard (ranks of the Zipf distribution).
    pub keys_per_shard: Option<u64>,
    /// Zipf exponent θ over each shard's keys; 0 is uniform.
    pub zipf: Option<f64>,
    /// Operations per transaction.
    pub ops_per_txn: Option<u32>,
    /// Share of operations that are plain reads.
    pub read_ratio: Option<f64>,
    /// Distinct shards per transaction, fixed or a range.
    pub shards_per_txn: Option<ShardsPerTxn>,
    /// ycsb-t: % of transactions that add 1 to the key an index key names
    /// (its value, a key number): an update whose key depends on a read,
    /// which one-shot protocols reconnoiter first (Calvin's OLLP) (0).
    pub indirect_pct: Option<f64>,
    /// tpcc: warehouses (default: one per shard).
    pub warehouses: Option<u32>,
    /// tpcc: customers per district, and initial orders per district
    /// (3,000 in the specification).
    pub customers_per_district: Option<u32>,
    /// tpcc: items (100,000 in the specification).
    pub items: Option<u32>,
    /// tpcc: % of order lines supplied by another warehouse (1).
    pub remote_item_pct: Option<f64>,
    /// tpcc: % of Payments for a customer of another warehouse (15).
    pub remote_payment_pct: Option<f64>,
    /// tpcc: % of Payments and Order-Status naming the customer by last
    /// name (60).
    pub by_last_name_pct: Option<f64>,
    /// tpcc: % of New-Orders touching a second warehouse, which supplies
    /// one of its lines (SLOG §4's multi-warehouse transactions); instead
    /// of `remote_item_pct`'s per-line draw. Unset: the specification's.
    pub multi_warehouse_pct: Option<f64>,
    /// tpcc: each client is a terminal of a warehouse homed in its own
    /// region (SLOG §4: a warehouse's records are homed at the region
    /// nearest to it) (false).
    pub home_terminals: Option<bool>,
    /// The transaction mix in %: tpcc New-Order, Payment, Order-Status,
    /// Delivery, Stock-Level (45, 43, 4, 4, 4); retwis add-user,
    /// follow/unfollow, post-tweet, load-timeline (5, 15, 30, 50).
    pub mix: Option<Vec<f64>>,
    /// slog-ycsb: records each transaction reads and writes (10).
    pub records_per_txn: Option<u32>,
    /// slog-ycsb: how many of them are hot (2).
    pub hot_records: Option<u32>,
    /// slog-ycsb: hot records per partition (10,000).
    pub hot_set: Option<u64>,
    /// slog-ycsb: % of transactions touching records of two home regions;
    /// tpcc: % of multi-warehouse New-Orders whose second warehouse is
    /// homed in another region (50).
    pub multi_home_pct: Option<f64>,
    /// slog-ycsb: % of transactions touching two partitions.
    pub multi_partition_pct: Option<f64>,
    /// slog-ycsb: read-only transactions are snapshot reads (serializable,
    /// possibly stale: SLOG §3.1), labelled `snapshot-read` (false).
    pub snapshot_reads: Option<bool>,
    /// slog-ycsb: after this many transactions, each client's records are
    /// those homed at the next home region (its users moved; SLOG
    /// remasters them to the client's region). Unset: never.
    pub home_shift_after_txns: Option<u64>,
    /// ramp-ycsb: keys in all.
    pub keys: Option<u64>,
    /// ramp-ycsb: keys per transaction (4 to 128).
    pub txn_size: Option<u32>,
    /// ramp-ycsb: % of transactions that are read-only (the rest write
    /// only).
    pub read_txn_pct: Option<f64>,
    /// ramp-ycsb: bytes per written value.
    pub value_bytes: Option<u32>,
    /// Test-only: TPC-C New-Orders skip the district update (a broken
    /// workload the consistency conditions must catch). Not in files.
    #[serde(skip)]
    pub broken_new_order: bool,
}

/// Which kinds each kind-specific field applies to (the fields every kind
/// shares are not listed).
const FIELD_KINDS: &[(&str, &[WorkloadKind])] = {
    use WorkloadKind::*;
    &[
        ("keys_per_shard", &[Microbench, YcsbT, ListAppend, SlogYcsb, Retwis]),
        ("zipf", &[Microbench, YcsbT, ListAppend, RampYcsb, Retwis]),
        ("ops_per_txn", &[Microbench, YcsbT, ListAppend]),
        ("read_ratio", &[Microbench, YcsbT, ListAppend, SlogYcsb]),
        ("shards_per_txn", &[Microbench, YcsbT, ListAppend]),
        ("indirect_pct", &[YcsbT]),
        ("warehouses", &[Tpcc]),
        ("customers_per_district", &[Tpcc]),
        ("items", &[Tpcc]),
        ("remote_item_pct", &[Tpcc]),
        ("remote_payment_pct", &[Tpcc]),
        ("by_last_name_pct", &[Tpcc]),
        ("multi_warehouse_pct", &[Tpcc]),
        ("home_terminals", &[Tpcc]),
        ("mix", &[Tpcc, Retwis]),
        ("records_per_txn", &[SlogYcsb]),
        ("hot_records", &[SlogYcsb]),
        ("hot_set", &[SlogYcsb]),
        ("multi_home_pct", &[SlogYcsb, Tpcc]),
        ("multi_partition_pct", &[SlogYcsb]),
        ("snapshot_reads", &[SlogYcsb]),
        ("home_shift_after_txns", &[SlogYcsb]),
        ("keys", &[RampYcsb]),
        ("txn_size", &[RampYcsb]),
        ("read_txn_pct", &[RampYcsb]),
        ("value_bytes", &[RampYcsb]),
    ]
};

/// A workload setting that cannot work: the offending field and why.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SpecError {
    /// The field's name inside `[workload]` (e.g. `read_ratio`).
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for SpecError {}

/// Upper bound on operations per transaction, against typos.
pub const MAX_OPS_PER_TXN: u32 = 10_000;

fn spec_err(field: &'static str, message: String) -> Result<(), SpecError> {
    Err(SpecError { field, message })
}

impl WorkloadSpec {
    /// A workload of this kind with every field at its default.
    pub fn new(kind: WorkloadKind) -> WorkloadSpec {
        WorkloadSpec { kind, ..WorkloadSpec::default() }
    }

    /// Keys per shard: 1,000,000 for microbench and ycsb-t (Tiga §5.1),
    /// 8 for list-append (contention, so that anomalies can show).
    pub fn keys_per_shard(&self) -> u64 {
        self.keys_per_shard.unwrap_or(match self.kind {
            WorkloadKind::ListAppend => 8,
            _ => 1_000_000,
        })
    }

    /// Zipf θ: 0.5 for microbench (Tiga's default skew), 0.99 for ycsb-t
    /// (YCSB's zipfian constant), 0 (uniform) for list-append.
    pub fn zipf(&self) -> f64 {
        self.zipf.unwrap_or(match self.kind {
            WorkloadKind::Microbench => 0.5,
            WorkloadKind::YcsbT => 0.99,
            _ => 0.0,
        })
    }

    /// Operations per transaction: 3 for microbench, 4 otherwise.
    pub fn ops_per_txn(&self) -> u32 {
        self.ops_per_txn.unwrap_or(match self.kind {
            WorkloadKind::Microbench => 3,
            _ => 4,
        })
    }

    /// Share of reads: 0 for microbench (all increments), 0.5 otherwise.
    pub fn read_ratio(&self) -> f64 {
        self.read_ratio.unwrap_or(match self.kind {
            WorkloadKind::Microbench => 0.0,
            _ => 0.5,
        })
    }

    /// Distinct shards per transaction on a cluster of `shards`: microbench
    /// touches `min(3, shards)`; the others draw from
    /// `[1, min(ops_per_txn, shards)]`.
    pub fn shards_per_txn(&self, shards: u32) -> ShardsPerTxn {
        if let Some(s) = self.shards_per_txn {
            return s;
        }
        match self.kind {
            WorkloadKind::Microbench => ShardsPerTxn::Fixed(3.min(shards)),
            _ => ShardsPerTxn::Range(1, self.ops_per_txn().min(shards).max(1)),
        }
    }

    /// The kind-specific fields this file sets.
    fn fields_set(&self) -> Vec<&'static str> {
        let set = [
            ("keys_per_shard", self.keys_per_shard.is_some()),
            ("zipf", self.zipf.is_some()),
            ("ops_per_txn", self.ops_per_txn.is_some()),
            ("read_ratio", self.read_ratio.is_some()),
            ("shards_per_txn", self.shards_per_txn.is_some()),
            ("indirect_pct", self.indirect_pct.is_some()),
            ("warehouses", self.warehouses.is_some()),
            ("customers_per_district", self.customers_per_district.is_some()),
            ("items", self.items.is_some()),
            ("remote_item_pct", self.remote_item_pct.is_some()),
            ("remote_payment_pct", self.remote_payment_pct.is_some()),
            ("by_last_name_pct", self.by_last_name_pct.is_some()),
            ("multi_warehouse_pct", self.multi_warehouse_pct.is_some()),
            ("home_terminals", self.home_terminals.is_some()),
            ("mix", self.mix.is_some()),
            ("records_per_txn", self.records_per_txn.is_some()),
            ("hot_records", self.hot_records.is_some()),
            ("hot_set", self.hot_set.is_some()),
            ("multi_home_pct", self.multi_home_pct.is_some()),
            ("multi_partition_pct", self.multi_partition_pct.is_some()),
            ("snapshot_reads", self.snapshot_reads.is_some()),
            ("home_shift_after_txns", self.home_shift_after_txns.is_some()),
            ("keys", self.keys.is_some()),
            ("txn_size", self.txn_size.is_some()),
            ("read_txn_pct", self.read_txn_pct.is_some()),
            ("value_bytes", self.value_bytes.is_some()),
        ];
        set.into_iter().filter(|(_, on)| *on).map(|(name, _)| name).collect()
    }

    /// A field set for a kind it does not apply to.
    fn check_fields_apply(&self) -> Result<(), SpecError> {
        for field in self.fields_set() {
            let kinds = FIELD_KINDS.iter().find(|(f, _)| *f == field).map_or(&[][..], |(_, k)| k);
            if !kinds.contains(&self.kind) {
                let names: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
                return spec_err(
                    field,
                    format!("does not apply to kind = \"{}\" (only to kind = {})", self.kind, names.join(" or ")),
                );
            }
        }
        Ok(())
    }

    /// Checks the workload against a cluster of `shards` shards.
    pub fn check(&self, shards: u32) -> Result<(), SpecError> {
        self.check_fields_apply()?;
        match self.kind {
            WorkloadKind::Tpcc => return crate::tpcc::check(self, shards),
            WorkloadKind::SlogYcsb => return crate::slog_ycsb::check(self, shards),
            WorkloadKind::RampYcsb => return crate::ramp_ycsb::check(self),
            WorkloadKind::Retwis => return crate::retwis::check(self, shards),
            WorkloadKind::Microbench | WorkloadKind::YcsbT | WorkloadKind::ListAppend => {}
        }
        self.check_distribution()?;
        self.check_mix()?;
        self.check_shape(shards)
    }

    /// [`WorkloadSpec::check`] as a one-line message `field: problem`.
    pub fn validate(&self, shards: u32) -> Result<(), String> {
        self.check(shards).map_err(|e| e.to_string())
    }

    fn check_distribution(&self) -> Result<(), SpecError> {
        let theta = self.zipf();
        if !theta.is_finite() || theta < 0.0 {
            return spec_err("zipf", format!("must be a number >= 0 (0 = uniform), got {theta}"));
        }
        if self.keys_per_shard() == 0 {
            return spec_err("keys_per_shard", "must be at least 1".into());
        }
        Ok(())
    }

    fn check_mix(&self) -> Result<(), SpecError> {
        let ratio = self.read_ratio();
        if !(0.0..=1.0).contains(&ratio) {
            return spec_err("read_ratio", format!("must be a share between 0 and 1, got {ratio}"));
        }
        if self.kind == WorkloadKind::Microbench && ratio != 0.0 {
            return spec_err(
                "read_ratio",
                "microbench transactions are all increments; use kind = \"ycsb-t\" for reads".into(),
            );
        }
        let indirect = self.indirect_pct.unwrap_or(0.0);
        if !(0.0..=100.0).contains(&indirect) {
            return spec_err("indirect_pct", format!("must be a percentage between 0 and 100, got {indirect}"));
        }
        let ops = self.ops_per_txn();
        if ops == 0 || ops > MAX_OPS_PER_TXN {
            return spec_err("ops_per_txn", format!("must be between 1 and {MAX_OPS_PER_TXN}, got {ops}"));
        }
        Ok(())
    }

    fn check_shape(&self, shards: u32) -> Result<(), SpecError> {
        if shards == 0 {
            return spec_err("shards_per_txn", "the cluster has no shards".into());
        }
        let spt = self.shards_per_txn(shards);
        let (lo, hi) = spt.bounds();
        if lo == 0 || lo > hi {
            return spec_err(
                "shards_per_txn",
                format!("must be a positive count or a range [lo, hi] with 1 <= lo <= hi, got {spt}"),
            );
        }
        if hi > shards {
            return spec_err("shards_per_txn", format!("{spt} exceeds the cluster's {shards} shard(s)"));
        }
        let ops = self.ops_per_txn();
        if ops < hi {
            return spec_err(
                "ops_per_txn",
                format!(
                    "{ops} operation(s) cannot touch {hi} shards (shards_per_txn = {spt}): each touched shard needs one"
                ),
            );
        }
        self.check_key_space(shards, ops - lo + 1)
    }

    /// Every key must fit in 64 bits and one shard must hold enough
    /// distinct keys for the operations a transaction may put there.
    fn check_key_space(&self, shards: u32, max_ops_on_one_shard: u32) -> Result<(), SpecError> {
        let keys = self.keys_per_shard();
        if keys > u64::MAX / u64::from(shards) {
            return spec_err(
                "keys_per_shard",
                format!("{keys} keys on each of {shards} shards exceed the 64-bit key space"),
            );
        }
        if keys < u64::from(max_ops_on_one_shard) {
            return spec_err(
                "keys_per_shard",
                format!(
                    "{keys} key(s) per shard cannot give {max_ops_on_one_shard} distinct keys on one shard in a transaction"
                ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        workload: WorkloadSpec,
    }

    fn parse(text: &str) -> Result<WorkloadSpec, String> {
        toml::from_str::<Doc>(&format!("[workload]\n{text}")).map(|d| d.workload).map_err(|e| e.message().to_string())
    }

    #[test]
    fn kind_names_round_trip() {
        for kind in WorkloadKind::ALL {
            let spec = parse(&format!("kind = \"{}\"", kind.name())).unwrap();
            assert_eq!(spec.kind, kind);
        }
        let err = parse("kind = \"tpc-c\"").unwrap_err();
        assert!(err.contains("unknown variant"), "{err}");
    }

    #[test]
    fn per_kind_defaults() {
        let mb = WorkloadSpec::new(WorkloadKind::Microbench);
        assert_eq!(mb.keys_per_shard(), 1_000_000);
        assert_eq!(mb.ops_per_txn(), 3);
        assert_eq!(mb.read_ratio(), 0.0);
        assert_eq!(mb.zipf(), 0.5);
        assert_eq!(mb.shards_per_txn(3), ShardsPerTxn::Fixed(3));
        assert_eq!(mb.shards_per_txn(1), ShardsPerTxn::Fixed(1));
        let y = WorkloadSpec::new(WorkloadKind::YcsbT);
        assert_eq!((y.ops_per_txn(), y.read_ratio()), (4, 0.5));
        assert_eq!(y.shards_per_txn(3), ShardsPerTxn::Range(1, 3));
        let la = WorkloadSpec::new(WorkloadKind::ListAppend);
        assert_eq!(la.keys_per_shard(), 8);
        assert_eq!((la.ops_per_txn(), la.read_ratio()), (4, 0.5));
        for spec in [mb, y, la] {
            for shards in 1..6 {
                assert_eq!(spec.check(shards), Ok(()), "{spec:?} on {shards}");
            }
        }
    }

    #[test]
    fn a_field_of_another_kind_is_named() {
        let spec = parse("kind = \"ycsb-t\"\nwarehouses = 4").unwrap();
        let err = spec.check(3).unwrap_err();
        assert_eq!(err.field, "warehouses");
        assert!(err.message.contains("only to kind = \"tpcc\""), "{err}");
        let spec = parse("kind = \"tpcc\"\nzipf = 0.5").unwrap();
        assert_eq!(spec.check(3).unwrap_err().field, "zipf");
    }

    #[test]
    fn validation_names_the_field() {
        let cases: [(WorkloadSpec, &str); 7] = [
            (
                WorkloadSpec {
                    shards_per_txn: Some(ShardsPerTxn::Fixed(4)),
                    ..WorkloadSpec::new(WorkloadKind::Microbench)
                },
                "shards_per_txn",
            ),
            (
                WorkloadSpec {
                    shards_per_txn: Some(ShardsPerTxn::Range(3, 2)),
                    ..WorkloadSpec::new(WorkloadKind::YcsbT)
                },
                "shards_per_txn",
            ),
            (
                WorkloadSpec {
                    ops_per_txn: Some(2),
                    shards_per_txn: Some(ShardsPerTxn::Fixed(3)),
                    ..WorkloadSpec::new(WorkloadKind::YcsbT)
                },
                "ops_per_txn",
            ),
            (WorkloadSpec { read_ratio: Some(1.5), ..WorkloadSpec::new(WorkloadKind::YcsbT) }, "read_ratio"),
            (WorkloadSpec { read_ratio: Some(0.5), ..WorkloadSpec::new(WorkloadKind::Microbench) }, "read_ratio"),
            (WorkloadSpec { zipf: Some(-1.0), ..WorkloadSpec::new(WorkloadKind::YcsbT) }, "zipf"),
            (
                WorkloadSpec {
                    keys_per_shard: Some(2),
                    ops_per_txn: Some(4),
                    shards_per_txn: Some(ShardsPerTxn::Fixed(1)),
                    ..WorkloadSpec::new(WorkloadKind::ListAppend)
                },
                "keys_per_shard",
            ),
        ];
        for (spec, field) in cases {
            let err = spec.check(3).unwrap_err();
            assert_eq!(err.field, field, "{err}");
            assert!(spec.validate(3).unwrap_err().starts_with(field));
        }
    }

    #[test]
    fn shards_per_txn_accepts_a_count_or_a_range() {
        let fixed = parse("shards_per_txn = 2").unwrap();
        assert_eq!(fixed.shards_per_txn, Some(ShardsPerTxn::Fixed(2)));
        let range = parse("shards_per_txn = [1, 3]").unwrap();
        assert_eq!(range.shards_per_txn, Some(ShardsPerTxn::Range(1, 3)));
        for bad in ["[1, 2, 3]", "[1]", "-1", "\"two\"", "1.5"] {
            let err = parse(&format!("shards_per_txn = {bad}")).unwrap_err();
            assert!(err.contains("shards") || err.contains("range"), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = parse("zipff = 0.5").unwrap_err();
        assert!(err.contains("unknown field `zipff`"), "{err}");
    }
}
