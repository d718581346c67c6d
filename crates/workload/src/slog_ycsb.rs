//! The `slog-ycsb` workload: SLOG's YCSB (SLOG §4, "For YCSB, we use a
//! table..."): every transaction reads and updates `records_per_txn`
//! records, `hot_records` of them drawn uniformly from a hot set of
//! `hot_set` records per partition and the rest from the cold records;
//! `multi_partition_pct` of transactions touch two partitions (shards) and
//! `multi_home_pct` touch records of two home regions.
//!
//! Keys come from the deployment's [`meridian_core::KeyLayout`], so each
//! record's shard and home are exact: a single-home transaction's records
//! are all homed at the client's home — its own region when that is a home
//! region, otherwise home `client index mod homes` (clients in client-only
//! regions are dealt to the homes in turn). A multi-home transaction adds a
//! second home, the next one in the layout's order. With
//! `home_shift_after_txns`, a client's records become the next home's after
//! that many transactions (its users moved: SLOG's Figure 11 remastering). With one home region
//! (or one shard) every transaction is single-home (single-partition).
//! `read_ratio` of transactions only read their records (label
//! `read-only`, or `snapshot-read` with `snapshot_reads`: then they ask only
//! for a serializable, possibly stale snapshot, SLOG §3.1); the others
//! increment each (`single-home`, `multi-home`).

use crate::spec::{SpecError, WorkloadSpec};
use crate::{ClientInfo, Generator, TagSource, Txn};
use meridian_core::{Key, KeyLayout, Op, Program, ReadMode, Rng};

/// The resolved `[workload]` of kind `slog-ycsb`.
#[derive(Clone, Debug, PartialEq)]
pub struct SlogYcsbSpec {
    pub records_per_txn: u32,
    pub hot_records: u32,
    pub hot_set: u64,
    pub keys_per_shard: u64,
    pub multi_home_pct: f64,
    pub multi_partition_pct: f64,
    pub read_ratio: f64,
    pub snapshot_reads: bool,
    pub home_shift_after_txns: Option<u64>,
}

impl SlogYcsbSpec {
    pub fn of(spec: &WorkloadSpec) -> SlogYcsbSpec {
        SlogYcsbSpec {
            records_per_txn: spec.records_per_txn.unwrap_or(10),
            hot_records: spec.hot_records.unwrap_or(2),
            hot_set: spec.hot_set.unwrap_or(10_000),
            keys_per_shard: spec.keys_per_shard.unwrap_or(1_000_000),
            multi_home_pct: spec.multi_home_pct.unwrap_or(0.0),
            multi_partition_pct: spec.multi_partition_pct.unwrap_or(0.0),
            read_ratio: spec.read_ratio.unwrap_or(0.0),
            snapshot_reads: spec.snapshot_reads.unwrap_or(false),
            home_shift_after_txns: spec.home_shift_after_txns,
        }
    }
}

fn err(field: &'static str, message: String) -> Result<(), SpecError> {
    Err(SpecError { field, message })
}

/// Validates the `slog-ycsb` fields against a cluster of `shards` shards.
pub fn check(spec: &WorkloadSpec, shards: u32) -> Result<(), SpecError> {
    let s = SlogYcsbSpec::of(spec);
    if !(1..=1_000).contains(&s.records_per_txn) {
        return err("records_per_txn", format!("must be between 1 and 1000, got {}", s.records_per_txn));
    }
    if s.hot_records > s.records_per_txn {
        return err(
            "hot_records",
            format!("{} hot records do not fit in {} records per transaction", s.hot_records, s.records_per_txn),
        );
    }
    if s.keys_per_shard == 0 || s.keys_per_shard > u64::MAX / 64 / u64::from(shards.max(1)) {
        return err("keys_per_shard", format!("must be between 1 and the 64-bit key space, got {}", s.keys_per_shard));
    }
    if s.hot_set < u64::from(s.hot_records) || s.hot_set >= s.keys_per_shard {
        return err(
            "hot_set",
            format!(
                "must hold at least the {} hot records and be smaller than keys_per_shard ({}), got {}",
                s.hot_records, s.keys_per_shard, s.hot_set
            ),
        );
    }
    // Each transaction needs distinct records: the cold ones of one shard
    // and home must be plenty.
    if s.keys_per_shard - s.hot_set < u64::from(s.records_per_txn) * 64 {
        return err("keys_per_shard", format!("too few cold records for {} per transaction", s.records_per_txn));
    }
    for (field, pct) in [("multi_home_pct", s.multi_home_pct), ("multi_partition_pct", s.multi_partition_pct)] {
        if !(0.0..=100.0).contains(&pct) {
            return err(field, format!("must be a percentage between 0 and 100, got {pct}"));
        }
    }
    if s.multi_partition_pct > 0.0 && shards < 2 {
        return err("multi_partition_pct", "needs at least two shards".into());
    }
    if !(0.0..=1.0).contains(&s.read_ratio) {
        return err("read_ratio", format!("must be a share between 0 and 1, got {}", s.read_ratio));
    }
    Ok(())
}

pub struct SlogYcsb {
    spec: SlogYcsbSpec,
    layout: KeyLayout,
    /// The client's home (an index into `layout.homes`).
    home: usize,
    /// Transactions generated so far (for `home_shift_after_txns`).
    generated: u64,
}

pub fn generator(spec: &WorkloadSpec, client: &ClientInfo) -> SlogYcsb {
    let layout = client.layout.clone();
    let home =
        layout.homes.iter().position(|h| *h == client.region).unwrap_or(client.index as usize % layout.homes.len());
    SlogYcsb { spec: SlogYcsbSpec::of(spec), layout, home, generated: 0 }
}

impl SlogYcsb {
    /// Records per (shard, home) slice, and the hot ones among them.
    fn slice(&self) -> (u64, u64) {
        let homes = self.layout.homes.len() as u64;
        let per = (self.spec.keys_per_shard / homes).max(1);
        let hot = (self.spec.hot_set / homes).max(u64::from(self.spec.hot_records.min(1)));
        (per, hot.min(per - 1).max(1))
    }

    fn record(&self, rng: &mut Rng, shard: u32, home: usize, hot: bool) -> Key {
        let (per, hot_n) = self.slice();
        let n = if hot { rng.below(hot_n) } else { hot_n + rng.below(per - hot_n) };
        self.layout.key(shard, home, n)
    }
}

impl Generator for SlogYcsb {
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        let shards_n = self.layout.shards;
        let homes_n = self.layout.homes.len();
        self.generated += 1;
        // The client's users moved: its records are the next home's.
        let shifted = self.spec.home_shift_after_txns.is_some_and(|n| self.generated > n);
        let own_home = if shifted { (self.home + 1) % homes_n } else { self.home };
        let first_shard = rng.below(u64::from(shards_n)) as u32;
        let multi_partition = shards_n > 1 && rng.chance(self.spec.multi_partition_pct / 100.0);
        let multi_home = homes_n > 1 && rng.chance(self.spec.multi_home_pct / 100.0);
        let shards: Vec<u32> = if multi_partition {
            vec![first_shard, (first_shard + 1 + rng.below(u64::from(shards_n) - 1) as u32) % shards_n]
        } else {
            vec![first_shard]
        };
        let homes: Vec<usize> = if multi_home { vec![own_home, (own_home + 1) % homes_n] } else { vec![own_home] };
        let read_only = rng.chance(self.spec.read_ratio);
        let mut keys: Vec<Key> = Vec::with_capacity(self.spec.records_per_txn as usize);
        for i in 0..self.spec.records_per_txn as usize {
            // Spread the records so that every chosen shard and home has one.
            let shard = shards[i % shards.len()];
            let home = homes[(i / shards.len()) % homes.len()];
            let hot = i < self.spec.hot_records as usize;
            let key = loop {
                let k = self.record(rng, shard, home, hot);
                if !keys.contains(&k) {
                    break k;
                }
            };
            keys.push(key);
        }
        let ops = keys
            .into_iter()
            .map(|key| if read_only { Op::Read { key } } else { Op::Increment { key, delta: 1, tag: tags.next() } })
            .collect();
        let label = match (read_only, multi_home) {
            (true, _) if self.spec.snapshot_reads => "snapshot-read",
            (true, _) => "read-only",
            (false, true) => "multi-home",
            (false, false) => "single-home",
        };
        let mode = if read_only && self.spec.snapshot_reads { ReadMode::Snapshot } else { ReadMode::Strict };
        Txn::new(Program::new(ops).with_mode(mode), label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{NodeId, RegionId};

    fn client(index: u32, region: u16) -> ClientInfo {
        let layout = KeyLayout { shards: 4, homes: vec![RegionId(0), RegionId(1), RegionId(2)] };
        ClientInfo { node: NodeId(index), region: RegionId(region), index, index_in_region: 0, clients: 4, layout }
    }

    fn spec(mh: f64, mp: f64) -> WorkloadSpec {
        WorkloadSpec {
            multi_home_pct: Some(mh),
            multi_partition_pct: Some(mp),
            keys_per_shard: Some(300_000),
            hot_set: Some(3_000),
            ..WorkloadSpec::new(crate::WorkloadKind::SlogYcsb)
        }
    }

    fn txns(spec: &WorkloadSpec, c: &ClientInfo, seed: u64, n: usize) -> Vec<Txn> {
        let mut g = generator(spec, c);
        let (mut rng, mut tags) = (Rng::new(seed), TagSource::new(c.index));
        (0..n).map(|_| g.next(&mut rng, &mut tags)).collect()
    }

    #[test]
    fn single_home_transactions_stay_at_the_clients_home_and_multi_home_ones_span_two() {
        let c = client(0, 1);
        for t in txns(&spec(0.0, 0.0), &c, 1, 200) {
            assert!(t.program.ops.iter().all(|op| c.layout.home_index(op.key()) == 1), "home region 1");
            assert_eq!(t.label, "single-home");
            assert_eq!(t.program.ops.len(), 10);
        }
        for t in txns(&spec(100.0, 0.0), &c, 1, 200) {
            let mut homes: Vec<usize> = t.program.ops.iter().map(|op| c.layout.home_index(op.key())).collect();
            homes.sort_unstable();
            homes.dedup();
            assert_eq!(homes, vec![1, 2], "two homes");
            assert_eq!(t.label, "multi-home");
        }
        // A client-only region is dealt a home by its index.
        let remote = client(5, 3);
        let t = &txns(&spec(0.0, 0.0), &remote, 1, 1)[0];
        assert!(t.program.ops.iter().all(|op| remote.layout.home_index(op.key()) == 5 % 3));
    }

    #[test]
    fn after_the_home_shift_a_clients_records_are_the_next_homes() {
        let c = client(0, 1);
        let shifted = WorkloadSpec { home_shift_after_txns: Some(50), ..spec(0.0, 0.0) };
        let all = txns(&shifted, &c, 3, 100);
        let home = |t: &Txn| c.layout.home_index(t.program.ops[0].key());
        assert!(all[..50].iter().all(|t| home(t) == 1), "its own home first");
        assert!(all[50..].iter().all(|t| home(t) == 2 && t.label == "single-home"), "then the next one's");
    }

    #[test]
    fn multi_partition_transactions_touch_two_shards_and_hot_records_come_from_the_hot_set() {
        let c = client(0, 0);
        for t in txns(&spec(0.0, 100.0), &c, 2, 200) {
            let mut shards: Vec<u32> = t.program.ops.iter().map(|op| c.layout.shard_of(op.key()).0).collect();
            shards.sort_unstable();
            shards.dedup();
            assert_eq!(shards.len(), 2);
            let hot_limit = 3_000 / 3;
            let hot = t.program.ops.iter().filter(|op| op.key().0 / 4 / 3 < hot_limit).count();
            assert!(hot >= 2, "the two hot records");
        }
        let all = txns(&spec(0.0, 0.0), &c, 2, 100);
        assert!(all.iter().all(|t| {
            t.program.ops.iter().all(|op| c.layout.shard_of(op.key()) == c.layout.shard_of(t.program.ops[0].key()))
        }));
    }

    #[test]
    fn generation_is_deterministic_per_seed_and_client() {
        let (a, b) = (client(0, 0), client(1, 0));
        assert_eq!(txns(&spec(10.0, 10.0), &a, 3, 30), txns(&spec(10.0, 10.0), &a, 3, 30));
        assert_ne!(txns(&spec(10.0, 10.0), &a, 3, 30), txns(&spec(10.0, 10.0), &a, 4, 30));
        assert_ne!(txns(&spec(10.0, 10.0), &a, 3, 30), txns(&spec(10.0, 10.0), &b, 3, 30));
    }

    #[test]
    fn bad_fields_are_named() {
        let cases: [(WorkloadSpec, &str); 5] = [
            (WorkloadSpec { records_per_txn: Some(0), ..spec(0.0, 0.0) }, "records_per_txn"),
            (WorkloadSpec { hot_records: Some(11), ..spec(0.0, 0.0) }, "hot_records"),
            (WorkloadSpec { hot_set: Some(1), ..spec(0.0, 0.0) }, "hot_set"),
            (WorkloadSpec { multi_home_pct: Some(120.0), ..spec(0.0, 0.0) }, "multi_home_pct"),
            (WorkloadSpec { read_ratio: Some(2.0), ..spec(0.0, 0.0) }, "read_ratio"),
        ];
        for (s, field) in cases {
            assert_eq!(s.check(4).unwrap_err().field, field);
        }
        assert_eq!(spec(0.0, 50.0).check(1).unwrap_err().field, "multi_partition_pct");
    }
}
