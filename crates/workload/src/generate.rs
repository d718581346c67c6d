//! The generator shared by every implemented kind: pick the shards a
//! transaction touches, spread its operations over them, draw a distinct
//! Zipf-ranked key per operation, and choose each operation's type.
//!
//! A key of rank `r` on shard `s` is `Key(r * shards + s)`, matching
//! `Topology::shard_of` (`key % shards`).

use crate::spec::{WorkloadKind, WorkloadSpec};
use crate::tags::TagSource;
use crate::zipf::Zipf;
use crate::{ClientInfo, Generator, Txn};
use meridian_core::procedure::{Indirect, Procedure, TAGS_PER_PART};
use meridian_core::{Key, Op, Program, Rng};

/// Redraws of a colliding key before falling back to the next free rank.
const MAX_REDRAWS: u32 = 32;

/// Builds the generator of a workload for one client, after checking the
/// spec against the cluster's shards (the error is `field: problem`).
pub fn generator(spec: &WorkloadSpec, client: &ClientInfo) -> Result<Box<dyn Generator + Send>, String> {
    let shards = client.layout.shards;
    spec.validate(shards)?;
    let mix = match spec.kind {
        WorkloadKind::Tpcc => return Ok(Box::new(crate::tpcc::generator(spec, client))),
        WorkloadKind::SlogYcsb => return Ok(Box::new(crate::slog_ycsb::generator(spec, client))),
        WorkloadKind::RampYcsb => return Ok(Box::new(crate::ramp_ycsb::generator(spec)?)),
        WorkloadKind::Retwis => return Ok(Box::new(crate::retwis::generator(spec, client)?)),
        WorkloadKind::Microbench => OpMix::Increments,
        WorkloadKind::YcsbT => OpMix::ReadOrIncrement,
        WorkloadKind::ListAppend => OpMix::ReadOrAppend,
    };
    let (lo, hi) = spec.shards_per_txn(shards).bounds();
    Ok(Box::new(ShardedGenerator {
        mix,
        shards,
        zipf: Zipf::new(spec.keys_per_shard(), spec.zipf())?,
        ops: spec.ops_per_txn(),
        read_ratio: spec.read_ratio(),
        indirect: spec.indirect_pct.unwrap_or(0.0) / 100.0,
        shards_lo: lo,
        shards_hi: hi,
        shard_pool: (0..shards).collect(),
    }))
}

/// What each operation of a transaction may be.
#[derive(Copy, Clone, Debug)]
enum OpMix {
    /// Every operation increments (MicroBench).
    Increments,
    /// Reads with probability `read_ratio`, otherwise increments (YCSB-T).
    ReadOrIncrement,
    /// Reads with probability `read_ratio`, otherwise appends (list-append).
    ReadOrAppend,
}

#[derive(Clone, Debug)]
struct ShardedGenerator {
    mix: OpMix,
    shards: u32,
    zipf: Zipf,
    ops: u32,
    read_ratio: f64,
    /// ycsb-t: the share of updates through an index key.
    indirect: f64,
    shards_lo: u32,
    shards_hi: u32,
    /// A permutation of all shards; its prefix is the current choice.
    shard_pool: Vec<u32>,
}

impl Generator for ShardedGenerator {
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        // Drawn only when asked for, so that other files' streams stay.
        if self.indirect > 0.0 && rng.chance(self.indirect) {
            return self.indirect(rng, tags);
        }
        let touched = self.choose_shards(rng);
        let op_shards = self.spread_ops(rng, touched);
        let mut keys: Vec<Key> = Vec::with_capacity(op_shards.len());
        for shard in op_shards {
            let key = self.distinct_key(rng, shard, &keys);
            keys.push(key);
        }
        let ops = keys.into_iter().map(|key| self.op(rng, tags, key)).collect();
        let program = Program::new(ops);
        let label = match self.mix {
            OpMix::Increments => "increment",
            _ if program.is_read_only() => "read-only",
            _ => "read-write",
        };
        Txn::new(program, label)
    }
}

impl ShardedGenerator {
    /// Draws how many shards this transaction touches and which: the first
    /// `k` entries of the pool after a partial Fisher-Yates shuffle.
    fn choose_shards(&mut self, rng: &mut Rng) -> usize {
        let k = rng.range_inclusive(u64::from(self.shards_lo), u64::from(self.shards_hi)) as usize;
        let n = self.shard_pool.len();
        for i in 0..k.min(n) {
            let j = i + rng.below((n - i) as u64) as usize;
            self.shard_pool.swap(i, j);
        }
        k.min(n)
    }

    /// The shard of each operation: one per touched shard first, the rest
    /// on touched shards drawn uniformly.
    fn spread_ops(&self, rng: &mut Rng, touched: usize) -> Vec<u32> {
        let chosen = &self.shard_pool[..touched];
        let mut out: Vec<u32> = chosen.to_vec();
        for _ in touched..self.ops as usize {
            out.push(chosen[rng.below(touched as u64) as usize]);
        }
        out
    }

    /// An update through an index: adds 1 to the key a Zipf-drawn index
    /// key names.
    fn indirect(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        let shard = rng.below(u64::from(self.shards)) as u32;
        let index = self.key(shard, self.zipf.sample(rng));
        let tag = tags.block(TAGS_PER_PART);
        Txn::new(Program::procedure(Procedure::Indirect(Indirect { index, delta: 1, tag })), "indirect")
    }

    fn key(&self, shard: u32, rank: u64) -> Key {
        Key(rank * u64::from(self.shards) + u64::from(shard))
    }

    /// A Zipf-ranked key on `shard` not in `taken`: redrawn a bounded
    /// number of times, then the next free rank upward.
    fn distinct_key(&self, rng: &mut Rng, shard: u32, taken: &[Key]) -> Key {
        let mut rank = self.zipf.sample(rng);
        for _ in 0..MAX_REDRAWS {
            if !taken.contains(&self.key(shard, rank)) {
                return self.key(shard, rank);
            }
            rank = self.zipf.sample(rng);
        }
        let n = self.zipf.n();
        (0..n.min(taken.len() as u64 + 1))
            .map(|step| self.key(shard, (rank + step) % n))
            .find(|key| !taken.contains(key))
            .unwrap_or_else(|| self.key(shard, rank))
    }

    fn op(&self, rng: &mut Rng, tags: &mut TagSource, key: Key) -> Op {
        let read = match self.mix {
            OpMix::Increments => false,
            OpMix::ReadOrIncrement | OpMix::ReadOrAppend => rng.chance(self.read_ratio),
        };
        match (read, self.mix) {
            (true, _) => Op::Read { key },
            (false, OpMix::ReadOrAppend) => Op::Append { key, element: tags.next() },
            (false, _) => Op::Increment { key, delta: 1, tag: tags.next() },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::ShardsPerTxn;
    use std::collections::{BTreeSet, HashSet};

    fn shard_of(key: Key, shards: u32) -> u32 {
        (key.0 % u64::from(shards)) as u32
    }

    pub(crate) fn client(shards: u32) -> ClientInfo {
        let layout = meridian_core::KeyLayout { shards, homes: vec![meridian_core::RegionId(0)] };
        ClientInfo {
            node: meridian_core::NodeId(0),
            region: meridian_core::RegionId(0),
            index: 0,
            index_in_region: 0,
            clients: 1,
            layout,
        }
    }

    fn programs(spec: &WorkloadSpec, shards: u32, seed: u64, n: usize) -> Vec<Program> {
        let mut g = generator(spec, &client(shards)).unwrap();
        let mut rng = Rng::new(seed);
        let mut tags = TagSource::new(0);
        (0..n).map(|_| g.next(&mut rng, &mut tags).program).collect()
    }

    fn distinct_shards(p: &Program, shards: u32) -> usize {
        p.ops.iter().map(|op| shard_of(op.key(), shards)).collect::<BTreeSet<_>>().len()
    }

    fn distinct_keys(p: &Program) -> usize {
        p.ops.iter().map(Op::key).collect::<HashSet<_>>().len()
    }

    #[test]
    fn microbench_increments_three_distinct_shards() {
        let spec = WorkloadSpec::new(WorkloadKind::Microbench);
        for p in programs(&spec, 5, 1, 500) {
            assert_eq!(p.ops.len(), 3);
            assert!(p.ops.iter().all(|op| matches!(op, Op::Increment { delta: 1, .. })));
            assert_eq!(distinct_shards(&p, 5), 3);
            assert_eq!(distinct_keys(&p), 3);
        }
    }

    #[test]
    fn shards_per_txn_ranges_are_respected_and_covered() {
        let spec = WorkloadSpec {
            shards_per_txn: Some(ShardsPerTxn::Range(2, 4)),
            ops_per_txn: Some(6),
            ..WorkloadSpec::new(WorkloadKind::YcsbT)
        };
        let mut seen = BTreeSet::new();
        for p in programs(&spec, 6, 2, 1000) {
            let k = distinct_shards(&p, 6);
            assert!((2..=4).contains(&k), "{k} shards");
            assert_eq!(p.ops.len(), 6);
            assert_eq!(distinct_keys(&p), 6);
            seen.insert(k);
        }
        assert_eq!(seen, BTreeSet::from([2, 3, 4]));
    }

    #[test]
    fn ycsb_t_mixes_reads_and_increments() {
        let spec = WorkloadSpec::new(WorkloadKind::YcsbT);
        let ps = programs(&spec, 3, 3, 2000);
        let ops: Vec<&Op> = ps.iter().flat_map(|p| &p.ops).collect();
        let reads = ops.iter().filter(|op| matches!(op, Op::Read { .. })).count();
        let share = reads as f64 / ops.len() as f64;
        assert!((share - 0.5).abs() < 0.05, "read share {share}");
        assert!(ops.iter().all(|op| matches!(op, Op::Read { .. } | Op::Increment { .. })));
    }

    #[test]
    fn ycsb_t_updates_through_an_index_in_the_share_asked_and_only_when_asked() {
        let spec = WorkloadSpec { indirect_pct: Some(20.0), ..WorkloadSpec::new(WorkloadKind::YcsbT) };
        let ps = programs(&spec, 3, 3, 2000);
        let indirect = ps.iter().filter(|p| matches!(p.procedure.as_deref(), Some(Procedure::Indirect(_)))).count();
        let share = indirect as f64 / ps.len() as f64;
        assert!((share - 0.2).abs() < 0.03, "indirect share {share}");
        assert!(ps.iter().filter(|p| p.procedure.is_some()).all(|p| !p.is_one_shot()), "their keys depend on a read");
        let plain = programs(&WorkloadSpec::new(WorkloadKind::YcsbT), 3, 3, 200);
        let zero = WorkloadSpec { indirect_pct: Some(0.0), ..WorkloadSpec::new(WorkloadKind::YcsbT) };
        assert_eq!(programs(&zero, 3, 3, 200), plain, "0 % draws nothing more: the same stream");
    }

    #[test]
    fn list_append_has_contention_and_unique_elements() {
        let spec = WorkloadSpec::new(WorkloadKind::ListAppend);
        let ps = programs(&spec, 2, 4, 500);
        let mut elements = HashSet::new();
        let mut keys = HashSet::new();
        for p in &ps {
            assert_eq!(distinct_keys(p), p.ops.len());
            for op in &p.ops {
                keys.insert(op.key());
                match op {
                    Op::Append { element, .. } => assert!(elements.insert(*element)),
                    Op::Read { .. } => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert!(keys.len() <= 16, "{} keys", keys.len());
        assert!(!elements.is_empty());
    }

    #[test]
    fn tiny_key_spaces_still_give_distinct_keys() {
        let spec = WorkloadSpec {
            keys_per_shard: Some(4),
            zipf: Some(3.0),
            shards_per_txn: Some(ShardsPerTxn::Fixed(1)),
            ..WorkloadSpec::new(WorkloadKind::ListAppend)
        };
        for p in programs(&spec, 1, 5, 300) {
            assert_eq!(distinct_keys(&p), 4);
        }
    }

    #[test]
    fn same_seed_same_programs() {
        let spec = WorkloadSpec::new(WorkloadKind::YcsbT);
        assert_eq!(programs(&spec, 3, 7, 50), programs(&spec, 3, 7, 50));
        assert_ne!(programs(&spec, 3, 7, 50), programs(&spec, 3, 8, 50));
    }

    #[test]
    fn invalid_specs_do_not_build() {
        let spec = WorkloadSpec { txn_size: Some(0), ..WorkloadSpec::new(WorkloadKind::RampYcsb) };
        let err = generator(&spec, &client(3)).err().unwrap();
        assert!(err.starts_with("txn_size:"), "{err}");
        let spec = WorkloadSpec {
            shards_per_txn: Some(ShardsPerTxn::Fixed(3)),
            ..WorkloadSpec::new(WorkloadKind::Microbench)
        };
        assert!(generator(&spec, &client(2)).is_err());
    }
}
