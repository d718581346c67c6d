//! The `tpcc` workload: TPC-C's five transactions (the procedures of
//! `meridian_core::tpcc`) with the standard mix, and the audit that checks
//! TPC-C's consistency conditions 1-4 on the final database.
//!
//! Inputs follow clause 2 of the specification, scaled: each client is a
//! terminal of one home warehouse (clients are dealt to warehouses in
//! turn); the district is drawn per transaction; customers and items by
//! NURand (clause 2.1.6, with `A` shrunk to the scaled range); 5-15 order
//! lines of 1-10 units, `remote_item_pct` of them supplied by another
//! warehouse; 1 % of New-Orders name the unused item and roll back;
//! `remote_payment_pct` of Payments for a customer of another warehouse;
//! `by_last_name_pct` of Payments and Order-Status by last name.
//!
//! For SLOG's TPC-C experiment (§4, Figure 9): `multi_warehouse_pct` of
//! New-Orders touch a second warehouse, which supplies one of their lines
//! (the others are supplied at home), and `multi_home_pct` of those pick a
//! warehouse homed in another region (warehouse `w` is homed at server
//! region `(w - 1) % regions`); `home_terminals` deals each client a
//! warehouse homed in its own region.

use crate::spec::{SpecError, WorkloadSpec};
use crate::{ClientInfo, Generator, TagSource, Txn};
use meridian_core::procedure::{Procedure, TAGS_PER_PART};
use meridian_core::tpcc::{
    CustomerRef, DISTRICTS, Delivery, LINES_MAX, LineInput, NewOrder, OrderStatus, Payment, Scale, StockLevel,
    TpccKind, TpccTxn, last_name,
};
use meridian_core::{Key, Op, OpResult, Program, Rng};
use std::collections::BTreeMap;

/// The standard mix (clause 5.2.3): New-Order, Payment, Order-Status,
/// Delivery, Stock-Level.
pub const MIX: [f64; 5] = [45.0, 43.0, 4.0, 4.0, 4.0];
const WAREHOUSES_MAX: u32 = 4_000;
const CUSTOMERS_MAX: u32 = 4_000;
const ITEMS_MAX: u32 = 1_000_000;

/// The resolved `[workload]` of kind `tpcc`.
#[derive(Clone, Debug, PartialEq)]
pub struct TpccSpec {
    pub warehouses: u32,
    pub customers: u32,
    pub items: u32,
    pub remote_item_pct: f64,
    pub remote_payment_pct: f64,
    pub by_last_name_pct: f64,
    pub multi_warehouse_pct: Option<f64>,
    pub multi_home_pct: f64,
    pub home_terminals: bool,
    pub mix: [f64; 5],
    pub broken_new_order: bool,
}

impl TpccSpec {
    pub fn of(spec: &WorkloadSpec, shards: u32) -> TpccSpec {
        let mix = spec.mix.as_deref().and_then(|m| <[f64; 5]>::try_from(m).ok()).unwrap_or(MIX);
        TpccSpec {
            warehouses: spec.warehouses.unwrap_or(shards.max(1)),
            customers: spec.customers_per_district.unwrap_or(3_000),
            items: spec.items.unwrap_or(100_000),
            remote_item_pct: spec.remote_item_pct.unwrap_or(1.0),
            remote_payment_pct: spec.remote_payment_pct.unwrap_or(15.0),
            by_last_name_pct: spec.by_last_name_pct.unwrap_or(60.0),
            multi_warehouse_pct: spec.multi_warehouse_pct,
            multi_home_pct: spec.multi_home_pct.unwrap_or(50.0),
            home_terminals: spec.home_terminals.unwrap_or(false),
            mix,
            broken_new_order: spec.broken_new_order,
        }
    }

    pub fn scale(&self, shards: u32, homes: u32) -> Scale {
        Scale { warehouses: self.warehouses, customers: self.customers, items: self.items, shards, homes }
    }
}

fn err(field: &'static str, message: String) -> Result<(), SpecError> {
    Err(SpecError { field, message })
}

/// Validates the `tpcc` fields.
pub fn check(spec: &WorkloadSpec, shards: u32) -> Result<(), SpecError> {
    if let Some(m) = &spec.mix {
        if m.len() != 5 || m.iter().any(|p| !p.is_finite() || *p < 0.0) || (m.iter().sum::<f64>() - 100.0).abs() > 1e-6
        {
            return err(
                "mix",
                format!(
                    "must be five non-negative percentages summing to 100 (New-Order, Payment, Order-Status, Delivery, Stock-Level), got {m:?}"
                ),
            );
        }
    }
    let t = TpccSpec::of(spec, shards);
    if !(1..=WAREHOUSES_MAX).contains(&t.warehouses) {
        return err("warehouses", format!("must be between 1 and {WAREHOUSES_MAX}, got {}", t.warehouses));
    }
    if !(1..=CUSTOMERS_MAX).contains(&t.customers) {
        return err("customers_per_district", format!("must be between 1 and {CUSTOMERS_MAX}, got {}", t.customers));
    }
    if !(1..=ITEMS_MAX).contains(&t.items) {
        return err("items", format!("must be between 1 and {ITEMS_MAX}, got {}", t.items));
    }
    if spec.multi_warehouse_pct.is_some() && spec.remote_item_pct.is_some() {
        return err("multi_warehouse_pct", "replaces remote_item_pct's per-line draw: set one of them".into());
    }
    if spec.multi_home_pct.is_some() && spec.multi_warehouse_pct.is_none() {
        return err("multi_home_pct", "applies to multi-warehouse New-Orders: set multi_warehouse_pct too".into());
    }
    for (field, pct) in [
        ("remote_item_pct", t.remote_item_pct),
        ("remote_payment_pct", t.remote_payment_pct),
        ("by_last_name_pct", t.by_last_name_pct),
        ("multi_warehouse_pct", t.multi_warehouse_pct.unwrap_or(0.0)),
        ("multi_home_pct", t.multi_home_pct),
    ] {
        if !(0.0..=100.0).contains(&pct) {
            return err(field, format!("must be a percentage between 0 and 100, got {pct}"));
        }
    }
    Ok(())
}

/// NURand(A, x, y) of clause 2.1.6, with the run constant `c`.
fn nurand(rng: &mut Rng, a: u64, x: u64, y: u64, c: u64) -> u64 {
    let r = rng.range_inclusive(0, a) | rng.range_inclusive(x, y);
    ((r + c) % (y - x + 1)) + x
}

/// `A` for a scaled range of `n` values: the specification's when it fits.
fn nurand_a(spec_a: u64, n: u64) -> u64 {
    let mut a = spec_a;
    while a > 0 && a >= n {
        a >>= 1;
    }
    a
}

/// A terminal of warehouse `w`.
pub struct TpccGenerator {
    spec: TpccSpec,
    scale: Scale,
    w: u32,
    c_customer: u64,
    c_item: u64,
}

/// The generator of client `client`.
pub fn generator(spec: &WorkloadSpec, client: &ClientInfo) -> TpccGenerator {
    let t = TpccSpec::of(spec, client.layout.shards);
    let homes = client.layout.homes.len() as u32;
    let scale = t.scale(client.layout.shards, homes);
    let home = client.layout.homes.iter().position(|r| *r == client.region).map(|h| h as u32);
    let w = match home.filter(|h| t.home_terminals && *h < t.warehouses) {
        // The warehouses homed here are h + 1, h + 1 + homes, ...
        Some(h) => h + 1 + homes * (client.index_in_region % (t.warehouses - h).div_ceil(homes)),
        None => client.index % t.warehouses + 1,
    };
    TpccGenerator { spec: t, scale, w, c_customer: 259, c_item: 7_911 }
}

impl TpccGenerator {
    fn customer_id(&self, rng: &mut Rng) -> u32 {
        let n = u64::from(self.spec.customers);
        nurand(rng, nurand_a(1_023, n), 1, n, self.c_customer) as u32
    }

    fn item_id(&self, rng: &mut Rng) -> u32 {
        let n = u64::from(self.spec.items);
        nurand(rng, nurand_a(8_191, n), 1, n, self.c_item) as u32
    }

    fn customer_ref(&self, rng: &mut Rng, w: u32, d: u32) -> CustomerRef {
        if rng.chance(self.spec.by_last_name_pct / 100.0) {
            // A name that exists: the first min(1000, customers) customers
            // carry the names 0.. in order (clause 4.3.2.3).
            let names = u64::from(self.spec.customers.min(1_000));
            let c = nurand(rng, nurand_a(255, names), 0, names - 1, 123) as u32 + 1;
            CustomerRef::LastName(last_name(w, d, c))
        } else {
            CustomerRef::Id(self.customer_id(rng))
        }
    }

    fn other_warehouse(&self, rng: &mut Rng) -> u32 {
        let n = self.spec.warehouses;
        if n == 1 {
            return self.w;
        }
        let k = rng.below(u64::from(n - 1)) as u32 + 1;
        (self.w - 1 + k) % n + 1
    }

    /// Another warehouse homed in another region (`other_home`) or in
    /// this one's, if there is one; else any other.
    fn warehouse_homed(&self, rng: &mut Rng, other_home: bool) -> u32 {
        let homes = self.scale.homes.max(1);
        let home_of = |w: u32| (w - 1) % homes;
        let fits: Vec<u32> = (1..=self.spec.warehouses)
            .filter(|w| *w != self.w && (home_of(*w) != home_of(self.w)) == other_home)
            .collect();
        if fits.is_empty() {
            return self.other_warehouse(rng);
        }
        fits[rng.below(fits.len() as u64) as usize]
    }

    fn new_order(&self, rng: &mut Rng) -> TpccKind {
        let d = rng.range_inclusive(1, u64::from(DISTRICTS)) as u32;
        let count = rng.range_inclusive(5, u64::from(LINES_MAX)) as usize;
        let rollback = rng.chance(0.01);
        // SLOG §4: one line supplied by a second warehouse, or none.
        let second = self.spec.multi_warehouse_pct.map(|pct| {
            let multi = self.spec.warehouses > 1 && rng.chance(pct / 100.0);
            let other_home = rng.chance(self.spec.multi_home_pct / 100.0);
            multi.then(|| (self.warehouse_homed(rng, other_home), rng.below(count as u64) as usize))
        });
        let mut lines: Vec<LineInput> = Vec::with_capacity(count);
        while lines.len() < count {
            let item = self.item_id(rng);
            if lines.iter().any(|l| l.item == item) {
                continue; // one line per item
            }
            let supply_w = match second {
                Some(Some((w, line))) if line == lines.len() => w,
                Some(_) => self.w,
                None => {
                    let remote = self.spec.warehouses > 1 && rng.chance(self.spec.remote_item_pct / 100.0);
                    if remote { self.other_warehouse(rng) } else { self.w }
                }
            };
            lines.push(LineInput { item, supply_w, qty: rng.range_inclusive(1, 10) as u32 });
        }
        if rollback {
            // Clause 2.4.1.4: the last item is unused, supplied at home.
            let last = lines.last_mut().expect("at least five lines");
            last.item = self.spec.items + 1;
            last.supply_w = self.w;
        }
        let c = self.customer_id(rng);
        TpccKind::NewOrder(NewOrder { w: self.w, d, c, lines, skip_district_update: self.spec.broken_new_order })
    }

    fn payment(&self, rng: &mut Rng) -> TpccKind {
        let d = rng.range_inclusive(1, u64::from(DISTRICTS)) as u32;
        let remote = self.spec.warehouses > 1 && rng.chance(self.spec.remote_payment_pct / 100.0);
        let (c_w, c_d) = if remote {
            (self.other_warehouse(rng), rng.range_inclusive(1, u64::from(DISTRICTS)) as u32)
        } else {
            (self.w, d)
        };
        let customer = self.customer_ref(rng, c_w, c_d);
        let amount = rng.range_inclusive(100, 500_000) as i64;
        TpccKind::Payment(Payment { w: self.w, d, c_w, c_d, customer, amount })
    }

    fn kind(&self, rng: &mut Rng) -> TpccKind {
        let mut x = rng.next_f64() * 100.0;
        for (i, pct) in self.spec.mix.iter().enumerate() {
            if x < *pct {
                return self.kind_of(i, rng);
            }
            x -= pct;
        }
        let last = self.spec.mix.iter().rposition(|p| *p > 0.0).unwrap_or(0);
        self.kind_of(last, rng)
    }

    fn kind_of(&self, i: usize, rng: &mut Rng) -> TpccKind {
        let d = |rng: &mut Rng| rng.range_inclusive(1, u64::from(DISTRICTS)) as u32;
        match i {
            0 => self.new_order(rng),
            1 => self.payment(rng),
            2 => {
                let d = d(rng);
                TpccKind::OrderStatus(OrderStatus { w: self.w, d, customer: self.customer_ref(rng, self.w, d) })
            }
            3 => TpccKind::Delivery(Delivery { w: self.w, carrier: rng.range_inclusive(1, 10) as u32 }),
            _ => {
                TpccKind::StockLevel(StockLevel { w: self.w, d: d(rng), threshold: rng.range_inclusive(10, 20) as i64 })
            }
        }
    }
}

impl Generator for TpccGenerator {
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn {
        let kind = self.kind(rng);
        let mut txn = TpccTxn { scale: self.scale, tag: 0, kind };
        txn.tag = tags.block(u64::from(txn.parts()) * TAGS_PER_PART);
        let label = txn.label();
        Txn::new(Program::procedure(Procedure::Tpcc(txn)), label)
    }
}

/// Keys read per audit transaction, at most.
const AUDIT_KEYS_PER_TXN: usize = 2_000;

/// The audit of TPC-C's consistency conditions 1-4 (clause 3.3.2) on the
/// final database, read through the protocol with plain read-only
/// transactions: first every warehouse's, district's and NEW-ORDER head's
/// row, then for every district the rows the conditions bound.
pub struct Audit {
    scale: Scale,
    /// `(w, d) -> (next order id, delivery head)`, after the first phase.
    districts: BTreeMap<(u32, u32), (u32, u32)>,
    phase: u8,
    /// The keys each pending program reads, in order.
    pending: Vec<Vec<Key>>,
    values: BTreeMap<Key, OpResult>,
    violations: Vec<String>,
}

impl Audit {
    pub fn new(spec: &WorkloadSpec, shards: u32, homes: u32) -> Audit {
        let scale = TpccSpec::of(spec, shards).scale(shards, homes);
        Audit {
            scale,
            districts: BTreeMap::new(),
            phase: 0,
            pending: Vec::new(),
            values: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// The next read-only programs to run, given the results of the
    /// previous ones (one per program, in order); `None` once the audit is
    /// complete.
    pub fn next(&mut self, results: &[Vec<OpResult>]) -> Option<Vec<Program>> {
        for (keys, values) in self.pending.iter().zip(results) {
            for (k, v) in keys.iter().zip(values) {
                self.values.insert(*k, v.clone());
            }
        }
        let keys = match self.phase {
            0 => self.first_keys(),
            1 => {
                self.read_districts();
                self.second_keys()
            }
            2 => {
                self.judge();
                return None;
            }
            _ => return None,
        };
        self.phase += 1;
        self.pending = keys.chunks(AUDIT_KEYS_PER_TXN).map(<[Key]>::to_vec).collect();
        Some(self.pending.iter().map(|ks| Program::new(ks.iter().map(|k| Op::Read { key: *k }).collect())).collect())
    }

    /// Every condition that failed, one line each.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    fn row(&self, key: Key) -> Option<Vec<i64>> {
        self.scale.row(key, self.values.get(&key).and_then(Option::as_ref))
    }

    fn first_keys(&self) -> Vec<Key> {
        let s = &self.scale;
        let mut keys = Vec::new();
        for w in 1..=s.warehouses {
            keys.push(s.warehouse(w));
            for d in 1..=DISTRICTS {
                keys.push(s.district(w, d));
                keys.push(s.no_head(w, d));
            }
        }
        keys
    }

    fn read_districts(&mut self) {
        let s = self.scale;
        for w in 1..=s.warehouses {
            let mut sum = 0;
            for d in 1..=DISTRICTS {
                let district = self.row(s.district(w, d)).unwrap_or_default();
                let head = self.row(s.no_head(w, d)).map_or(0, |r| r[0]);
                sum += district.get(1).copied().unwrap_or(0);
                let next = district.first().copied().unwrap_or(0);
                self.districts.insert((w, d), (next as u32, head as u32));
            }
            let w_ytd = self.row(s.warehouse(w)).map_or(0, |r| r[0]);
            if w_ytd != sum {
                self.violations.push(format!("condition 1: warehouse {w} W_YTD {w_ytd} != sum of D_YTD {sum}"));
            }
        }
    }

    fn second_keys(&self) -> Vec<Key> {
        let s = &self.scale;
        let mut keys = Vec::new();
        for (&(w, d), &(next, head)) in &self.districts {
            keys.extend([s.order(w, d, next - 1), s.order(w, d, next), s.new_order(w, d, next)]);
            keys.extend((head.saturating_sub(1).max(1)..next).map(|o| s.new_order(w, d, o)));
            for o in s.customers + 1..next {
                keys.push(s.order(w, d, o));
                keys.extend((1..=LINES_MAX).map(|n| s.order_line(w, d, o, n)));
            }
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    fn judge(&mut self) {
        let s = self.scale;
        let mut found = Vec::new();
        for (&(w, d), &(next, head)) in &self.districts {
            let at = format!("warehouse {w} district {d}");
            // Condition 2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID).
            if self.row(s.order(w, d, next - 1)).is_none() || self.row(s.order(w, d, next)).is_some() {
                found.push(format!("condition 2: {at}: D_NEXT_O_ID {next} is not one past the newest order"));
            }
            if self.row(s.new_order(w, d, next)).is_some() {
                found.push(format!("condition 2: {at}: a NEW-ORDER row past D_NEXT_O_ID - 1"));
            }
            // Condition 3: the NEW-ORDER rows are exactly [head, next - 1].
            for o in head.saturating_sub(1).max(1)..next {
                let present = self.row(s.new_order(w, d, o)).is_some();
                if present != (o >= head) {
                    let what = if present { "present" } else { "missing" };
                    found.push(format!("condition 3: {at}: NEW-ORDER {o} {what} (undelivered are {head}..{next})"));
                    break;
                }
            }
            // Condition 4: every order has exactly O_OL_CNT order lines.
            for o in s.customers + 1..next {
                let Some(order) = self.row(s.order(w, d, o)) else { continue };
                let lines = (1..=LINES_MAX).filter(|n| self.row(s.order_line(w, d, o, *n)).is_some()).count();
                if lines as i64 != order[1] {
                    found.push(format!("condition 4: {at}: order {o} has {lines} lines, O_OL_CNT {}", order[1]));
                    break;
                }
            }
        }
        self.violations.extend(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests::client;
    use meridian_core::Value;
    use meridian_core::procedure::execute;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            warehouses: Some(2),
            customers_per_district: Some(30),
            items: Some(200),
            ..WorkloadSpec::new(crate::WorkloadKind::Tpcc)
        }
    }

    fn txns(spec: &WorkloadSpec, seed: u64, n: usize) -> Vec<Txn> {
        let mut g = generator(spec, &client(2));
        let (mut rng, mut tags) = (Rng::new(seed), TagSource::new(0));
        (0..n).map(|_| g.next(&mut rng, &mut tags)).collect()
    }

    #[test]
    fn the_mix_is_the_standard_one_and_deterministic() {
        let all = txns(&spec(), 3, 4_000);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &all {
            *counts.entry(t.label).or_default() += 1;
        }
        let share = |l: &str| counts[l] as f64 / all.len() as f64 * 100.0;
        assert!((share("new-order") - 45.0).abs() < 3.0 && (share("payment") - 43.0).abs() < 3.0, "{counts:?}");
        for l in ["order-status", "delivery", "stock-level"] {
            assert!((share(l) - 4.0).abs() < 1.5, "{counts:?}");
        }
        assert_eq!(txns(&spec(), 3, 50), txns(&spec(), 3, 50));
        assert_ne!(txns(&spec(), 3, 50), txns(&spec(), 4, 50));
    }

    /// Runs transactions serially against a map and audits the result.
    fn run_and_audit(spec: &WorkloadSpec, n: usize) -> Vec<String> {
        let mut db: BTreeMap<Key, Value> = BTreeMap::new();
        for t in txns(spec, 9, n) {
            let Procedure::Tpcc(_) = t.program.procedure.as_deref().expect("a procedure") else { unreachable!() };
            let (_, writes) = execute(t.program.procedure.as_ref().unwrap(), |k| db.get(&k).cloned());
            db.extend(writes);
        }
        let mut audit = Audit::new(spec, 2, 1);
        let mut results: Vec<Vec<OpResult>> = Vec::new();
        while let Some(programs) = audit.next(&results) {
            results = programs.iter().map(|p| p.ops.iter().map(|op| db.get(&op.key()).cloned()).collect()).collect();
        }
        audit.violations().to_vec()
    }

    #[test]
    fn the_consistency_conditions_hold_after_a_serial_run() {
        assert_eq!(run_and_audit(&spec(), 1_500), Vec::<String>::new());
    }

    #[test]
    fn a_new_order_that_skips_the_district_update_breaks_condition_2() {
        let broken = WorkloadSpec { broken_new_order: true, ..spec() };
        let found = run_and_audit(&broken, 300);
        assert!(found.iter().any(|v| v.starts_with("condition 2")), "{found:?}");
    }

    /// SLOG §4, Figure 9: six regions, 24 warehouses, New-Orders only.
    fn slog_spec(multi_warehouse: f64, multi_home: f64) -> WorkloadSpec {
        WorkloadSpec {
            warehouses: Some(24),
            multi_warehouse_pct: Some(multi_warehouse),
            multi_home_pct: Some(multi_home),
            home_terminals: Some(true),
            mix: Some(vec![100.0, 0.0, 0.0, 0.0, 0.0]),
            ..spec()
        }
    }

    fn six_regions(index_in_region: u32, region: u16) -> ClientInfo {
        let homes = (0..6).map(meridian_core::RegionId).collect();
        let layout = meridian_core::KeyLayout { shards: 4, homes };
        let region = meridian_core::RegionId(region);
        ClientInfo { node: meridian_core::NodeId(0), region, index: 0, index_in_region, clients: 12, layout }
    }

    /// The warehouses each New-Order of `spec`'s client touches.
    fn warehouses_touched(spec: &WorkloadSpec, client: &ClientInfo, n: usize) -> Vec<Vec<u32>> {
        let mut g = generator(spec, client);
        let (mut rng, mut tags) = (Rng::new(5), TagSource::new(0));
        (0..n)
            .map(|_| {
                let txn = g.next(&mut rng, &mut tags);
                let Some(Procedure::Tpcc(TpccTxn { kind: TpccKind::NewOrder(o), .. })) =
                    txn.program.procedure.as_deref()
                else {
                    panic!("New-Orders only")
                };
                let mut ws: Vec<u32> = o.lines.iter().map(|l| l.supply_w).chain([o.w]).collect();
                ws.sort_unstable();
                ws.dedup();
                ws
            })
            .collect()
    }

    #[test]
    fn slogs_new_orders_touch_a_second_warehouse_in_the_shares_asked_homed_as_asked() {
        let client = six_regions(1, 2);
        let home_of = |w: u32| (w - 1) % 6;
        for (mw, mh) in [(10.0, 0.0), (100.0, 50.0), (100.0, 100.0)] {
            let all = warehouses_touched(&slog_spec(mw, mh), &client, 2_000);
            assert!(all.iter().all(|ws| ws.len() <= 2), "at most one other warehouse");
            let multi: Vec<&Vec<u32>> = all.iter().filter(|ws| ws.len() == 2).collect();
            let share = multi.len() as f64 / all.len() as f64 * 100.0;
            assert!((share - mw).abs() < 2.5, "{mw} % multi-warehouse: {share}");
            let other = multi.iter().filter(|ws| home_of(ws[0]) != home_of(ws[1])).count();
            let share = other as f64 / multi.len() as f64 * 100.0;
            assert!((share - mh).abs() < 5.0, "{mh} % of them multi-home: {share}");
            assert!(all.iter().all(|ws| ws.iter().any(|w| home_of(*w) == 2)), "its terminal's warehouse is homed here");
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let cases: [(WorkloadSpec, &str); 7] = [
            (WorkloadSpec { warehouses: Some(0), ..spec() }, "warehouses"),
            (WorkloadSpec { mix: Some(vec![50.0, 50.0]), ..spec() }, "mix"),
            (WorkloadSpec { remote_item_pct: Some(101.0), ..spec() }, "remote_item_pct"),
            (WorkloadSpec { customers_per_district: Some(0), ..spec() }, "customers_per_district"),
            (WorkloadSpec { remote_item_pct: Some(1.0), ..slog_spec(10.0, 50.0) }, "multi_warehouse_pct"),
            (WorkloadSpec { multi_warehouse_pct: None, ..slog_spec(10.0, 50.0) }, "multi_home_pct"),
            (slog_spec(110.0, 50.0), "multi_warehouse_pct"),
        ];
        for (s, field) in cases {
            assert_eq!(s.check(2).unwrap_err().field, field);
        }
    }
}
