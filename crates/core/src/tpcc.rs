//! TPC-C's five transactions as [`Procedure`](crate::procedure::Procedure)s
//! (TPC Benchmark C, Standard Specification 5.11, clause 2), over a
//! scaled-down database laid out for partitioning by warehouse.
//!
//! Layout. Every table is keyed so that all of warehouse `w`'s rows live on
//! shard `(w - 1) % shards` (`key % shards`, as `Topology::shard_of`): a
//! transaction's part for one warehouse runs where that warehouse lives.
//! A row is a key whose value is a [`Data::Row`] of integers (money in
//! cents, tax and discount in basis points); the empty row marks a deleted
//! one (a delivered NEW-ORDER). The ITEM table is read-only, so an item's
//! price is a function of its id, the same on every shard (as partitioned
//! TPC-C implementations replicate ITEM); an id past `items` is the
//! "unused" item of clause 2.4.1.4 whose New-Order rolls back.
//!
//! Initial database (clause 4.3.3, scaled by [`Scale`]): generated lazily
//! and deterministically. A key never written reads as absent and means its
//! initial row ([`Scale::initial`]): `customers` customers and as many
//! orders per district, the last 30 % of them still NEW-ORDERs. Customer
//! names follow clause 4.3.2.3 (the first 1,000 in sequence, the rest by
//! NURand); the index from a district's last names to its customers never
//! changes (customers are neither added nor renamed), so it too is a
//! function of the key.
//!
//! Deviations, for a key-value store: NEW-ORDER rows are consumed in order
//! through a per-district head pointer (`NO_HEAD`) rather than by scanning
//! for the oldest; a customer's latest order is kept in `LAST_ORDER`
//! rather than found by scanning ORDER; HISTORY rows are keyed by the
//! customer and its payment count; text columns (names, data, dist_info)
//! are left out.
//!
//! Footprints (see the procedure module): keys a part reaches through
//! reads are guarded. DISTRICT guards its orders, order lines and new
//! orders (every New-Order writes it; Delivery, Order-Status and
//! Stock-Level declare it or NO_HEAD); NO_HEAD guards the district's
//! customers and delivered rows (Delivery writes it; Payment's customer
//! part and Order-Status read it); `STOCK_GUARD(w)` guards warehouse `w`'s
//! stock for Stock-Level (every New-Order part that updates `w`'s stock
//! declares it as read, Stock-Level as write, so only those two conflict
//! on it).

use crate::ids::Key;
use crate::procedure::{Need, ReadMap, Step, TAGS_PER_PART};
use crate::program::{Data, Value};
use serde::{Deserialize, Serialize};

/// Districts per warehouse (clause 1.2).
pub const DISTRICTS: u32 = 10;
/// Order lines per order, at most (clause 2.4.1.3).
pub const LINES_MAX: u32 = 15;
/// Orders Stock-Level examines (clause 2.8.2.2).
pub const STOCK_LEVEL_ORDERS: u32 = 20;

/// How large the database is, and over how many shards it is spread.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Scale {
    pub warehouses: u32,
    /// Customers per district (3,000 in the specification), and the
    /// initial orders per district.
    pub customers: u32,
    /// Items (100,000 in the specification).
    pub items: u32,
    pub shards: u32,
    /// Home regions keys are spread over ([`crate::KeyLayout`]): every row
    /// of warehouse `w` is homed at index `(w - 1) % homes`.
    pub homes: u32,
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[repr(u64)]
enum Table {
    Warehouse = 1,
    District = 2,
    Customer = 3,
    LastOrder = 4,
    NameIndex = 5,
    History = 6,
    Order = 7,
    NewOrder = 8,
    OrderLine = 9,
    Stock = 10,
    NoHead = 11,
    StockGuard = 12,
}

const TABLE_SHIFT: u32 = 50;
const WAREHOUSE_SHIFT: u32 = 38;
const REST_BITS: u64 = (1 << WAREHOUSE_SHIFT) - 1;
/// Field widths inside the 38 bits after the warehouse.
const D_SHIFT: u32 = 34;
const ORDER_BITS: u32 = 24;

/// One 64-bit mixer for every deterministic draw of the initial database.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn h(parts: &[u64]) -> u64 {
    parts.iter().fold(0x7063_6374, |acc, p| mix(acc ^ mix(*p)))
}

/// An item's price in cents (1.00 to 100.00, clause 4.3.3.1).
pub fn item_price(item: u32) -> i64 {
    100 + (h(&[1, u64::from(item)]) % 9_901) as i64
}

fn tax_bp(w: u32, d: u32) -> i64 {
    (h(&[2, u64::from(w), u64::from(d)]) % 2_001) as i64
}

/// A customer's discount in basis points (0 to 50 %).
pub fn customer_discount_bp(w: u32, d: u32, c: u32) -> i64 {
    (h(&[3, u64::from(w), u64::from(d), u64::from(c)]) % 5_001) as i64
}

/// The customer's last name, as a number 0..999 (clause 4.3.2.3: the
/// first 1,000 customers in sequence, the rest by NURand(255, 0, 999)).
pub fn last_name(w: u32, d: u32, c: u32) -> u32 {
    if c <= 1_000 {
        return c - 1;
    }
    let x = h(&[4, u64::from(w), u64::from(d), u64::from(c)]);
    let (a, b) = (x % 256, (x >> 16) % 1_000);
    (((a | b) + 123) % 1_000) as u32
}

/// Districts whose name table is kept (a bound on the memo below).
const NAME_TABLES_MAX: usize = 4_096;

/// A district's customers by last name (index = name).
type NameTable = std::sync::Arc<Vec<Vec<u32>>>;

thread_local! {
    /// Name → customers of a district: a pure function of its arguments,
    /// memoized because every Payment and Order-Status by name needs it.
    static NAME_TABLES: std::cell::RefCell<std::collections::HashMap<(u32, u32, u32), NameTable>> =
        Default::default();
}

fn name_table(customers: u32, w: u32, d: u32) -> NameTable {
    NAME_TABLES.with(|memo| {
        let mut memo = memo.borrow_mut();
        if let Some(t) = memo.get(&(customers, w, d)) {
            return std::sync::Arc::clone(t);
        }
        let mut table = vec![Vec::new(); 1_000];
        for c in 1..=customers {
            table[last_name(w, d, c) as usize].push(c);
        }
        if memo.len() >= NAME_TABLES_MAX {
            memo.clear();
        }
        let table = std::sync::Arc::new(table);
        memo.insert((customers, w, d), std::sync::Arc::clone(&table));
        table
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Scale {
    /// The warehouse's shard.
    fn shard(&self, w: u32) -> u64 {
        debug_assert!(w >= 1 && w <= self.warehouses, "warehouse {w} of {}", self.warehouses);
        u64::from(w - 1) % u64::from(self.shards)
    }

    fn key(&self, table: Table, w: u32, rest: u64) -> Key {
        debug_assert!(rest <= REST_BITS);
        let slot = (table as u64) << TABLE_SHIFT | u64::from(w) << WAREHOUSE_SHIFT | rest;
        let homes = u64::from(self.homes.max(1));
        let home = u64::from(w - 1) % homes;
        Key((slot * homes + home) * u64::from(self.shards) + self.shard(w))
    }

    fn decode(&self, key: Key) -> (u64, u32, u64) {
        let slot = key.0 / u64::from(self.shards) / u64::from(self.homes.max(1));
        (slot >> TABLE_SHIFT, ((slot >> WAREHOUSE_SHIFT) & 0xfff) as u32, slot & REST_BITS)
    }

    pub fn warehouse(&self, w: u32) -> Key {
        self.key(Table::Warehouse, w, 0)
    }
    pub fn district(&self, w: u32, d: u32) -> Key {
        self.key(Table::District, w, u64::from(d) << D_SHIFT)
    }
    pub fn customer(&self, w: u32, d: u32, c: u32) -> Key {
        self.key(Table::Customer, w, u64::from(d) << D_SHIFT | u64::from(c))
    }
    pub fn last_order(&self, w: u32, d: u32, c: u32) -> Key {
        self.key(Table::LastOrder, w, u64::from(d) << D_SHIFT | u64::from(c))
    }
    pub fn name_index(&self, w: u32, d: u32, name: u32) -> Key {
        self.key(Table::NameIndex, w, u64::from(d) << D_SHIFT | u64::from(name))
    }
    pub fn history(&self, w: u32, d: u32, c: u32, payment: i64) -> Key {
        let n = (payment as u64) & ((1 << 22) - 1);
        self.key(Table::History, w, u64::from(d) << D_SHIFT | u64::from(c) << 22 | n)
    }
    pub fn order(&self, w: u32, d: u32, o: u32) -> Key {
        debug_assert!(o < 1 << ORDER_BITS, "order id {o} past the layout's bound");
        self.key(Table::Order, w, u64::from(d) << D_SHIFT | u64::from(o))
    }
    pub fn new_order(&self, w: u32, d: u32, o: u32) -> Key {
        self.key(Table::NewOrder, w, u64::from(d) << D_SHIFT | u64::from(o))
    }
    pub fn order_line(&self, w: u32, d: u32, o: u32, n: u32) -> Key {
        self.key(Table::OrderLine, w, u64::from(d) << D_SHIFT | u64::from(o) << 4 | u64::from(n))
    }
    pub fn stock(&self, w: u32, i: u32) -> Key {
        self.key(Table::Stock, w, u64::from(i))
    }
    pub fn no_head(&self, w: u32, d: u32) -> Key {
        self.key(Table::NoHead, w, u64::from(d) << D_SHIFT)
    }
    pub fn stock_guard(&self, w: u32) -> Key {
        self.key(Table::StockGuard, w, 0)
    }

    /// Orders per district delivered in the initial database (the first
    /// 70 %, clause 4.3.3.1).
    fn initially_delivered(&self) -> u32 {
        self.customers * 7 / 10
    }

    /// The customer of initial order `o` (a permutation of the customers).
    fn initial_order_customer(&self, w: u32, d: u32, o: u32) -> u32 {
        let n = u64::from(self.customers);
        let (p, q) = self.permutation(w, d);
        (((u64::from(o) - 1) * p + q) % n + 1) as u32
    }

    /// The initial order of customer `c` (inverse of the above).
    fn initial_order_of(&self, w: u32, d: u32, c: u32) -> u32 {
        let n = u64::from(self.customers);
        let (p, q) = self.permutation(w, d);
        let p_inv = (1..n.max(2)).find(|x| (p * x) % n == 1 % n).unwrap_or(1);
        ((((u64::from(c) - 1 + n - q % n) % n) * p_inv) % n + 1) as u32
    }

    fn permutation(&self, w: u32, d: u32) -> (u64, u64) {
        let n = u64::from(self.customers).max(1);
        let p = [7_919u64, 104_729, 1_299_709, 15_485_863].into_iter().find(|p| gcd(*p, n) == 1).unwrap_or(1) % n;
        let p = if n == 1 { 1 } else { p.max(1) };
        (p, h(&[5, u64::from(w), u64::from(d)]) % n)
    }

    fn initial_ol_cnt(&self, w: u32, d: u32, o: u32) -> u32 {
        5 + (h(&[6, u64::from(w), u64::from(d), u64::from(o)]) % 11) as u32
    }

    /// The customers of district `(w, d)` whose last name is `name`, in id
    /// order.
    pub fn customers_named(&self, w: u32, d: u32, name: u32) -> Vec<u32> {
        name_table(self.customers, w, d).get(name as usize).cloned().unwrap_or_default()
    }

    /// The initial row of a key, `None` when it does not exist initially.
    pub fn initial(&self, key: Key) -> Option<Vec<i64>> {
        let (table, w, rest) = self.decode(key);
        let d = (rest >> D_SHIFT) as u32;
        let low = rest & ((1 << D_SHIFT) - 1);
        let n = self.customers;
        let delivered = self.initially_delivered();
        match table {
            t if t == Table::Warehouse as u64 => Some(vec![30_000_000]),
            t if t == Table::District as u64 => Some(vec![i64::from(n) + 1, 3_000_000]),
            t if t == Table::Customer as u64 => Some(vec![-1_000, 1_000, 1, 0]),
            t if t == Table::LastOrder as u64 => {
                let c = low as u32;
                (c >= 1 && c <= n).then(|| vec![i64::from(self.initial_order_of(w, d, c))])
            }
            t if t == Table::NameIndex as u64 => {
                Some(self.customers_named(w, d, low as u32).into_iter().map(i64::from).collect())
            }
            t if t == Table::Order as u64 => {
                let o = low as u32;
                (o >= 1 && o <= n).then(|| {
                    let carrier = if o <= delivered { 1 + h(&[7, u64::from(o)]) % 10 } else { 0 };
                    let c = self.initial_order_customer(w, d, o);
                    vec![i64::from(c), i64::from(self.initial_ol_cnt(w, d, o)), carrier as i64]
                })
            }
            t if t == Table::NewOrder as u64 => {
                let o = low as u32;
                (o > delivered && o <= n).then(|| vec![1])
            }
            t if t == Table::OrderLine as u64 => {
                let (o, line) = ((low >> 4) as u32, (low & 0xf) as u32);
                (o >= 1 && o <= n && line >= 1 && line <= self.initial_ol_cnt(w, d, o)).then(|| {
                    let x = h(&[8, u64::from(w), u64::from(d), u64::from(o), u64::from(line)]);
                    let item = (x % u64::from(self.items)) as i64 + 1;
                    let (amount, done) = if o <= delivered { (0, 1) } else { ((x >> 20) as i64 % 999_999 + 1, 0) };
                    vec![item, i64::from(w), 5, amount, done]
                })
            }
            t if t == Table::Stock as u64 => Some(vec![10 + (h(&[9, u64::from(w), low]) % 91) as i64, 0, 0, 0]),
            t if t == Table::NoHead as u64 => Some(vec![i64::from(delivered) + 1]),
            _ => None,
        }
    }

    /// What a read returned, as a row: the initial row for an absent key,
    /// `None` for a row that does not exist or was deleted.
    pub fn row(&self, key: Key, read: Option<&Value>) -> Option<Vec<i64>> {
        match read.map(|v| &v.data) {
            None => self.initial(key),
            Some(Data::Row(r)) if r.is_empty() => None,
            Some(Data::Row(r)) => Some(r.to_vec()),
            Some(_) => None,
        }
    }
}

/// How a transaction names its customer (clause 2.5.1.2: 60 % by last
/// name).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum CustomerRef {
    Id(u32),
    LastName(u32),
}

/// One order line's input.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LineInput {
    pub item: u32,
    pub supply_w: u32,
    pub qty: u32,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NewOrder {
    pub w: u32,
    pub d: u32,
    pub c: u32,
    pub lines: Vec<LineInput>,
    /// Test-only: skip the district update (a broken New-Order the
    /// consistency conditions must catch).
    #[serde(default)]
    pub skip_district_update: bool,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Payment {
    pub w: u32,
    pub d: u32,
    pub c_w: u32,
    pub c_d: u32,
    pub customer: CustomerRef,
    pub amount: i64,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct OrderStatus {
    pub w: u32,
    pub d: u32,
    pub customer: CustomerRef,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Delivery {
    pub w: u32,
    pub carrier: u32,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StockLevel {
    pub w: u32,
    pub d: u32,
    pub threshold: i64,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum TpccKind {
    NewOrder(NewOrder),
    Payment(Payment),
    OrderStatus(OrderStatus),
    Delivery(Delivery),
    StockLevel(StockLevel),
}

/// A TPC-C transaction: its inputs, the database's scale, and the first
/// tag of its block.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TpccTxn {
    pub scale: Scale,
    pub tag: u64,
    pub kind: TpccKind,
}

/// Tags for one part's writes, in order.
struct Writes {
    next: u64,
    end: u64,
    out: Vec<(Key, Value)>,
}

impl Writes {
    fn new(tag: u64, part: u32) -> Writes {
        let first = tag + u64::from(part) * TAGS_PER_PART;
        Writes { next: first, end: first + TAGS_PER_PART, out: Vec::new() }
    }

    fn row(&mut self, key: Key, fields: Vec<i64>) {
        assert!(self.next < self.end, "a part writes at most {TAGS_PER_PART} values");
        self.out.push((key, Value::row(self.next, fields)));
        self.next += 1;
    }
}

/// Keys not read yet among `keys`, as needs of one kind.
fn missing(reads: &ReadMap, keys: impl IntoIterator<Item = Need>) -> Vec<Need> {
    keys.into_iter().filter(|n| !reads.contains_key(&n.key)).collect()
}

impl TpccTxn {
    /// The label of the transaction's type.
    pub fn label(&self) -> &'static str {
        match self.kind {
            TpccKind::NewOrder(_) => "new-order",
            TpccKind::Payment(_) => "payment",
            TpccKind::OrderStatus(_) => "order-status",
            TpccKind::Delivery(_) => "delivery",
            TpccKind::StockLevel(_) => "stock-level",
        }
    }

    pub fn is_read_only(&self) -> bool {
        matches!(self.kind, TpccKind::OrderStatus(_) | TpccKind::StockLevel(_))
    }

    pub fn parts(&self) -> u32 {
        match &self.kind {
            TpccKind::NewOrder(t) => 1 + t.remote_warehouses().len() as u32,
            TpccKind::Payment(_) => 2,
            _ => 1,
        }
    }

    pub fn anchor(&self, part: u32) -> Key {
        let s = &self.scale;
        match &self.kind {
            TpccKind::NewOrder(t) if part == 0 => s.district(t.w, t.d),
            TpccKind::NewOrder(t) => s.stock_guard(t.remote_warehouses()[part as usize - 1]),
            TpccKind::Payment(t) if part == 0 => s.district(t.w, t.d),
            TpccKind::Payment(t) => s.no_head(t.c_w, t.c_d),
            TpccKind::OrderStatus(t) => s.district(t.w, t.d),
            TpccKind::Delivery(t) => s.warehouse(t.w),
            TpccKind::StockLevel(t) => s.district(t.w, t.d),
        }
    }

    pub fn footprint(&self, part: u32) -> Vec<Need> {
        let s = &self.scale;
        match &self.kind {
            TpccKind::NewOrder(t) => t.footprint(s, part),
            TpccKind::Payment(t) if part == 0 => vec![Need::write(s.warehouse(t.w)), Need::write(s.district(t.w, t.d))],
            TpccKind::Payment(t) => {
                let c = t.customer_id(s);
                let mut keys = vec![Need::write(s.customer(t.c_w, t.c_d, c)), Need::read(s.no_head(t.c_w, t.c_d))];
                if let CustomerRef::LastName(n) = t.customer {
                    keys.push(Need::read(s.name_index(t.c_w, t.c_d, n)));
                }
                keys
            }
            TpccKind::OrderStatus(t) => {
                let c = customer_id(s, t.w, t.d, t.customer);
                let mut keys = vec![
                    Need::read(s.customer(t.w, t.d, c)),
                    Need::read(s.last_order(t.w, t.d, c)),
                    Need::read(s.no_head(t.w, t.d)),
                ];
                if let CustomerRef::LastName(n) = t.customer {
                    keys.push(Need::read(s.name_index(t.w, t.d, n)));
                }
                keys
            }
            TpccKind::Delivery(t) => {
                (1..=DISTRICTS).flat_map(|d| [Need::write(s.no_head(t.w, d)), Need::read(s.district(t.w, d))]).collect()
            }
            TpccKind::StockLevel(t) => {
                vec![Need::read(s.district(t.w, t.d)), Need::read(s.no_head(t.w, t.d)), Need::write(s.stock_guard(t.w))]
            }
        }
    }

    pub fn step(&self, part: u32, reads: &ReadMap) -> Step {
        let s = &self.scale;
        match &self.kind {
            TpccKind::NewOrder(t) => t.step(s, self.tag, part, reads),
            TpccKind::Payment(t) => t.step(s, self.tag, part, reads),
            TpccKind::OrderStatus(t) => t.step(s, reads),
            TpccKind::Delivery(t) => t.step(s, self.tag, reads),
            TpccKind::StockLevel(t) => t.step(s, reads),
        }
    }
}

/// The customer a reference names: by id, or the middle one of those with
/// the last name (clause 2.5.2.2; the index never changes, see the module
/// doc). `0` when nobody has the name.
fn customer_id(s: &Scale, w: u32, d: u32, customer: CustomerRef) -> u32 {
    match customer {
        CustomerRef::Id(c) => c,
        CustomerRef::LastName(n) => {
            let ids = s.customers_named(w, d, n);
            ids.get(ids.len().saturating_sub(1) / 2).copied().unwrap_or(0)
        }
    }
}

/// The middle customer of an index row as read.
fn middle_of(index: &[i64]) -> u32 {
    index.get(index.len().saturating_sub(1) / 2).map_or(0, |c| *c as u32)
}

impl NewOrder {
    /// Supplying warehouses other than the home one, sorted.
    pub fn remote_warehouses(&self) -> Vec<u32> {
        let mut ws: Vec<u32> = self.lines.iter().map(|l| l.supply_w).filter(|sw| *sw != self.w).collect();
        ws.sort_unstable();
        ws.dedup();
        ws
    }

    /// The supplying warehouse of part `part`.
    fn warehouse_of(&self, part: u32) -> u32 {
        if part == 0 { self.w } else { self.remote_warehouses()[part as usize - 1] }
    }

    /// Whether the order names the unused item: every part rolls back.
    fn rolls_back(&self, s: &Scale) -> bool {
        self.lines.iter().any(|l| l.item == 0 || l.item > s.items)
    }

    fn stocks(&self, s: &Scale, part: u32) -> Vec<(usize, Key)> {
        let sw = self.warehouse_of(part);
        self.lines.iter().enumerate().filter(|(_, l)| l.supply_w == sw).map(|(i, l)| (i, s.stock(sw, l.item))).collect()
    }

    fn footprint(&self, s: &Scale, part: u32) -> Vec<Need> {
        let sw = self.warehouse_of(part);
        let mut keys: Vec<Need> = self.stocks(s, part).into_iter().map(|(_, k)| Need::write(k)).collect();
        keys.push(Need::read(s.stock_guard(sw)));
        if part == 0 {
            keys.push(Need::read(s.warehouse(self.w)));
            keys.push(Need::write(s.district(self.w, self.d)));
            keys.push(Need::write(s.last_order(self.w, self.d, self.c)));
        }
        keys.sort_unstable();
        keys.dedup_by_key(|n| n.key);
        keys
    }

    fn step(&self, s: &Scale, tag: u64, part: u32, reads: &ReadMap) -> Step {
        if self.rolls_back(s) {
            // Clause 2.4.2.3: the unused item is found and the whole
            // transaction rolls back; every part knows it from the input.
            return Step::Rollback;
        }
        let stocks = self.stocks(s, part);
        let mut needs: Vec<Need> = stocks.iter().map(|(_, k)| Need::write(*k)).collect();
        if part == 0 {
            needs.push(Need::read(s.warehouse(self.w)));
            needs.push(Need::write(s.district(self.w, self.d)));
            needs.push(Need::write(s.last_order(self.w, self.d, self.c)));
        }
        let need = missing(reads, needs);
        if !need.is_empty() {
            return Step::Read(need);
        }
        let mut out = Writes::new(tag, part);
        for (i, key) in &stocks {
            let l = self.lines[*i];
            let stock = s.row(*key, reads[key].as_ref()).expect("stock rows always exist");
            let (qty, have) = (i64::from(l.qty), stock[0]);
            let left = if have >= qty + 10 { have - qty } else { have - qty + 91 };
            let remote = i64::from(l.supply_w != self.w);
            out.row(*key, vec![left, stock[1] + qty, stock[2] + 1, stock[3] + remote]);
        }
        if part == 0 {
            self.home_writes(s, reads, &mut out);
        }
        Step::Done(out.out)
    }

    /// The home warehouse's writes: the district's next order id, the
    /// ORDER, NEW-ORDER and ORDER-LINE rows, the customer's last order.
    fn home_writes(&self, s: &Scale, reads: &ReadMap, out: &mut Writes) {
        let dk = s.district(self.w, self.d);
        let district = s.row(dk, reads[&dk].as_ref()).expect("districts exist");
        let o = district[0] as u32;
        if !self.skip_district_update {
            out.row(dk, vec![district[0] + 1, district[1]]);
        }
        let tax = tax_bp(self.w, 0) + tax_bp(self.w, self.d);
        let discount = customer_discount_bp(self.w, self.d, self.c);
        out.row(s.order(self.w, self.d, o), vec![i64::from(self.c), self.lines.len() as i64, 0]);
        out.row(s.new_order(self.w, self.d, o), vec![1]);
        out.row(s.last_order(self.w, self.d, self.c), vec![i64::from(o)]);
        for (n, l) in self.lines.iter().enumerate() {
            let gross = i64::from(l.qty) * item_price(l.item);
            let amount = gross * (10_000 - discount) / 10_000 * (10_000 + tax) / 10_000;
            let key = s.order_line(self.w, self.d, o, n as u32 + 1);
            out.row(key, vec![i64::from(l.item), i64::from(l.supply_w), i64::from(l.qty), amount, 0]);
        }
    }
}

impl Payment {
    fn customer_id(&self, s: &Scale) -> u32 {
        customer_id(s, self.c_w, self.c_d, self.customer)
    }

    fn step(&self, s: &Scale, tag: u64, part: u32, reads: &ReadMap) -> Step {
        let mut out = Writes::new(tag, part);
        if part == 0 {
            let (wk, dk) = (s.warehouse(self.w), s.district(self.w, self.d));
            let need = missing(reads, [Need::write(wk), Need::write(dk)]);
            if !need.is_empty() {
                return Step::Read(need);
            }
            let w = s.row(wk, reads[&wk].as_ref()).expect("warehouses exist");
            let d = s.row(dk, reads[&dk].as_ref()).expect("districts exist");
            out.row(wk, vec![w[0] + self.amount]);
            out.row(dk, vec![d[0], d[1] + self.amount]);
            return Step::Done(out.out);
        }
        let (cw, cd) = (self.c_w, self.c_d);
        let c = match self.customer {
            CustomerRef::Id(c) => c,
            CustomerRef::LastName(n) => {
                let ik = s.name_index(cw, cd, n);
                let Some(index) = reads.get(&ik) else { return Step::Read(vec![Need::read(ik)]) };
                middle_of(&s.row(ik, index.as_ref()).unwrap_or_default())
            }
        };
        if c == 0 {
            return Step::Rollback; // nobody has the name (never drawn)
        }
        let ck = s.customer(cw, cd, c);
        let need = missing(reads, [Need::write(ck), Need::read(s.no_head(cw, cd))]);
        if !need.is_empty() {
            return Step::Read(need);
        }
        let cust = s.row(ck, reads[&ck].as_ref()).expect("customers exist");
        let payments = cust[2] + 1;
        out.row(ck, vec![cust[0] - self.amount, cust[1] + self.amount, payments, cust[3]]);
        out.row(s.history(cw, cd, c, payments), vec![i64::from(self.w), i64::from(self.d), self.amount]);
        Step::Done(out.out)
    }
}

impl OrderStatus {
    fn step(&self, s: &Scale, reads: &ReadMap) -> Step {
        let (w, d) = (self.w, self.d);
        let c = match self.customer {
            CustomerRef::Id(c) => c,
            CustomerRef::LastName(n) => {
                let ik = s.name_index(w, d, n);
                let Some(index) = reads.get(&ik) else { return Step::Read(vec![Need::read(ik)]) };
                middle_of(&s.row(ik, index.as_ref()).unwrap_or_default())
            }
        };
        if c == 0 {
            return Step::Done(Vec::new());
        }
        let lk = s.last_order(w, d, c);
        let need = missing(reads, [Need::read(s.customer(w, d, c)), Need::read(lk), Need::read(s.no_head(w, d))]);
        if !need.is_empty() {
            return Step::Read(need);
        }
        let Some(o) = s.row(lk, reads[&lk].as_ref()).map(|r| r[0] as u32) else { return Step::Done(Vec::new()) };
        let ok = s.order(w, d, o);
        let Some(order) = reads.get(&ok) else { return Step::Read(vec![Need::read(ok)]) };
        let lines = s.row(ok, order.as_ref()).map_or(0, |r| r[1] as u32);
        let need = missing(reads, (1..=lines).map(|n| Need::read(s.order_line(w, d, o, n))));
        if need.is_empty() { Step::Done(Vec::new()) } else { Step::Read(need) }
    }
}

impl Delivery {
    fn step(&self, s: &Scale, tag: u64, reads: &ReadMap) -> Step {
        let w = self.w;
        let heads: Vec<Need> =
            (1..=DISTRICTS).flat_map(|d| [Need::write(s.no_head(w, d)), Need::read(s.district(w, d))]).collect();
        let need = missing(reads, heads);
        if !need.is_empty() {
            return Step::Read(need);
        }
        // The oldest undelivered order of each district, if any.
        let oldest: Vec<(u32, u32)> = (1..=DISTRICTS)
            .filter_map(|d| {
                let hk = s.no_head(w, d);
                let head = s.row(hk, reads[&hk].as_ref()).expect("heads exist")[0];
                let dk = s.district(w, d);
                let next = s.row(dk, reads[&dk].as_ref()).expect("districts exist")[0];
                (head < next).then_some((d, head as u32))
            })
            .collect();
        let orders =
            oldest.iter().flat_map(|(d, o)| [Need::write(s.new_order(w, *d, *o)), Need::write(s.order(w, *d, *o))]);
        let need = missing(reads, orders);
        if !need.is_empty() {
            return Step::Read(need);
        }
        let mut rest = Vec::new();
        for (d, o) in &oldest {
            let ok = s.order(w, *d, *o);
            let order = s.row(ok, reads[&ok].as_ref()).expect("an order below the district's next id exists");
            rest.push(Need::write(s.customer(w, *d, order[0] as u32)));
            rest.extend((1..=order[1] as u32).map(|n| Need::write(s.order_line(w, *d, *o, n))));
        }
        let need = missing(reads, rest);
        if !need.is_empty() {
            return Step::Read(need);
        }
        let mut out = Writes::new(tag, 0);
        for d in 1..=DISTRICTS {
            let hk = s.no_head(w, d);
            let Some((_, o)) = oldest.iter().find(|(od, _)| *od == d).copied() else { continue };
            let ok = s.order(w, d, o);
            let order = s.row(ok, reads[&ok].as_ref()).expect("read above");
            let mut total = 0;
            for n in 1..=order[1] as u32 {
                let lk = s.order_line(w, d, o, n);
                let mut line = s.row(lk, reads[&lk].as_ref()).expect("an order's lines exist");
                total += line[3];
                line[4] = 1;
                out.row(lk, line);
            }
            let ck = s.customer(w, d, order[0] as u32);
            let cust = s.row(ck, reads[&ck].as_ref()).expect("customers exist");
            out.row(ck, vec![cust[0] + total, cust[1], cust[2], cust[3] + 1]);
            out.row(ok, vec![order[0], order[1], i64::from(self.carrier)]);
            out.row(s.new_order(w, d, o), Vec::new());
            out.row(hk, vec![i64::from(o) + 1]);
        }
        Step::Done(out.out)
    }
}

impl StockLevel {
    fn step(&self, s: &Scale, reads: &ReadMap) -> Step {
        let (w, d) = (self.w, self.d);
        let dk = s.district(w, d);
        let Some(district) = reads.get(&dk) else {
            return Step::Read(vec![Need::read(dk), Need::read(s.no_head(w, d))]);
        };
        let next = s.row(dk, district.as_ref()).expect("districts exist")[0] as u32;
        let first = next.saturating_sub(STOCK_LEVEL_ORDERS).max(1);
        let need = missing(reads, (first..next).map(|o| Need::read(s.order(w, d, o))));
        if !need.is_empty() {
            return Step::Read(need);
        }
        let mut lines = Vec::new();
        for o in first..next {
            let ok = s.order(w, d, o);
            let count = s.row(ok, reads[&ok].as_ref()).map_or(0, |r| r[1] as u32);
            lines.extend((1..=count).map(|n| s.order_line(w, d, o, n)));
        }
        let need = missing(reads, lines.iter().map(|k| Need::read(*k)));
        if !need.is_empty() {
            return Step::Read(need);
        }
        let mut items: Vec<u32> =
            lines.iter().filter_map(|k| s.row(*k, reads[k].as_ref())).map(|line| line[0] as u32).collect();
        items.sort_unstable();
        items.dedup();
        let need = missing(reads, items.iter().map(|i| Need::read(s.stock(w, *i))));
        // The count below the threshold is the transaction's answer; the
        // history carries the stock rows it read.
        if need.is_empty() { Step::Done(Vec::new()) } else { Step::Read(need) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ShardId;
    use crate::procedure::{Procedure, execute, replay};
    use crate::program::{Op, Program};
    use std::collections::BTreeMap;

    fn scale() -> Scale {
        Scale { warehouses: 2, customers: 30, items: 100, shards: 2, homes: 3 }
    }

    /// A store of committed rows (initial rows are implicit).
    #[derive(Default)]
    struct Db(BTreeMap<Key, Value>);

    impl Db {
        fn run(&mut self, kind: TpccKind, tag: u64) -> (Vec<Option<Value>>, bool) {
            let p = Procedure::Tpcc(TpccTxn { scale: scale(), tag, kind });
            let (results, writes) = execute(&p, |k| self.0.get(&k).cloned());
            let rolled_back = replay(&p, &results).expect("results replay").rolled_back();
            for (k, v) in writes {
                self.0.insert(k, v);
            }
            (results, rolled_back)
        }

        fn row(&self, key: Key) -> Option<Vec<i64>> {
            scale().row(key, self.0.get(&key))
        }
    }

    fn new_order(w: u32, lines: Vec<LineInput>) -> TpccKind {
        TpccKind::NewOrder(NewOrder { w, d: 3, c: 7, lines, skip_district_update: false })
    }

    #[test]
    fn executing_a_piece_in_place_equals_building_it_first() {
        // A New-Order with a remote supplier has a part on each shard, and
        // plain operations beside it on both.
        let mut db = Db::default();
        db.run(new_order(1, vec![LineInput { item: 4, supply_w: 1, qty: 2 }]), 100);
        let lines = vec![LineInput { item: 5, supply_w: 1, qty: 3 }, LineInput { item: 9, supply_w: 2, qty: 1 }];
        let mut program =
            Program::procedure(Procedure::Tpcc(TpccTxn { scale: scale(), tag: 200, kind: new_order(1, lines) }));
        program.ops = vec![
            Op::Increment { key: Key(10), delta: 1, tag: 900 },
            Op::Read { key: Key(11) },
            Op::Increment { key: Key(10), delta: 2, tag: 901 },
        ];
        let shard_of = |k: Key| ShardId((k.0 % 2) as u32);
        for shard in [ShardId(0), ShardId(1)] {
            let built = program.piece(shard, shard_of);
            assert!(!built.parts.is_empty(), "a part on shard {shard:?}");
            let positions: Vec<u32> = program.positions_on(shard, shard_of).map(|i| i as u32).collect();
            assert_eq!(positions, built.positions, "positions without the piece");
            assert_eq!(program.parts_on(shard, shard_of).collect::<Vec<_>>(), built.parts, "parts without the piece");
            let read = |k: Key| db.0.get(&k).cloned();
            assert_eq!(program.execute_piece(shard, shard_of, read), built.execute(read));
        }
    }

    #[test]
    fn every_row_of_warehouse_w_lives_on_its_shard() {
        let s = scale();
        for w in 1..=2 {
            for key in
                [s.warehouse(w), s.district(w, 10), s.customer(w, 1, 30), s.order_line(w, 2, 3001, 15), s.stock(w, 100)]
            {
                assert_eq!(key.0 % 2, u64::from(w - 1));
                let layout = crate::KeyLayout { shards: 2, homes: vec![crate::RegionId(0); 3] };
                assert_eq!(layout.home_index(key), (w - 1) as usize % 3, "and is homed with its warehouse");
            }
        }
    }

    #[test]
    fn the_initial_database_meets_the_consistency_conditions_it_starts_from() {
        let s = scale();
        let d = s.initial(s.district(1, 1)).unwrap();
        assert_eq!(d[0], 31, "next order id after the 30 initial orders");
        assert_eq!(s.initial(s.warehouse(1)).unwrap()[0], 10 * d[1], "condition 1: W_YTD = sum(D_YTD)");
        assert!(s.initial(s.new_order(1, 1, 30)).is_some() && s.initial(s.new_order(1, 1, 21)).is_none());
        assert_eq!(s.initial(s.no_head(1, 1)).unwrap()[0], 22);
        for c in 1..=30 {
            let o = s.initial(s.last_order(1, 4, c)).unwrap()[0] as u32;
            assert_eq!(s.initial(s.order(1, 4, o)).unwrap()[0], i64::from(c), "orders and customers match");
        }
    }

    #[test]
    fn new_order_takes_the_district_id_and_writes_its_lines_and_remote_stock() {
        let mut db = Db::default();
        let lines = vec![LineInput { item: 5, supply_w: 1, qty: 3 }, LineInput { item: 9, supply_w: 2, qty: 4 }];
        let (_, rolled_back) = db.run(new_order(1, lines), 1 << 20);
        assert!(!rolled_back);
        let s = scale();
        assert_eq!(db.row(s.district(1, 3)).unwrap()[0], 32);
        assert_eq!(db.row(s.order(1, 3, 31)).unwrap(), vec![7, 2, 0]);
        assert!(db.row(s.order_line(1, 3, 31, 2)).is_some());
        assert_eq!(db.row(s.last_order(1, 3, 7)).unwrap(), vec![31]);
        assert_eq!(db.row(s.stock(2, 9)).unwrap()[3], 1, "a remote order line counts at its warehouse");
    }

    #[test]
    fn an_unused_item_rolls_every_part_back() {
        let mut db = Db::default();
        let lines = vec![LineInput { item: 5, supply_w: 2, qty: 3 }, LineInput { item: 101, supply_w: 1, qty: 1 }];
        let (_, rolled_back) = db.run(new_order(1, lines), 1 << 20);
        assert!(rolled_back);
        assert!(db.0.is_empty(), "nothing written");
    }

    #[test]
    fn payment_by_last_name_pays_the_middle_customer_of_the_index() {
        let s = scale();
        let name = last_name(2, 5, 17);
        let ids = s.customers_named(2, 5, name);
        let expect = ids[(ids.len() - 1) / 2];
        let mut db = Db::default();
        let kind = TpccKind::Payment(Payment {
            w: 1,
            d: 2,
            c_w: 2,
            c_d: 5,
            customer: CustomerRef::LastName(name),
            amount: 500,
        });
        db.run(kind, 1 << 20);
        assert_eq!(db.row(s.customer(2, 5, expect)).unwrap(), vec![-1_500, 1_500, 2, 0]);
        assert_eq!(db.row(s.history(2, 5, expect, 2)).unwrap(), vec![1, 2, 500]);
        assert_eq!(db.row(s.warehouse(1)).unwrap()[0], 30_000_500);
        assert_eq!(db.row(s.district(1, 2)).unwrap()[1], 3_000_500);
    }

    #[test]
    fn delivery_takes_the_oldest_new_order_of_every_district() {
        let s = scale();
        let mut db = Db::default();
        db.run(TpccKind::Delivery(Delivery { w: 1, carrier: 4 }), 1 << 20);
        for d in 1..=DISTRICTS {
            assert_eq!(db.row(s.no_head(1, d)).unwrap(), vec![23]);
            assert_eq!(db.row(s.new_order(1, d, 22)), None, "delivered");
            assert_eq!(db.row(s.order(1, d, 22)).unwrap()[2], 4);
        }
    }

    #[test]
    fn read_only_transactions_read_what_they_need_and_write_nothing() {
        let mut db = Db::default();
        let (results, _) =
            db.run(TpccKind::OrderStatus(OrderStatus { w: 1, d: 1, customer: CustomerRef::Id(3) }), 1 << 20);
        assert!(results.len() >= 3 + 5, "customer, last order, head, order and its lines");
        let (results, _) = db.run(TpccKind::StockLevel(StockLevel { w: 2, d: 4, threshold: 15 }), 1 << 20);
        assert!(results.len() > 20);
        assert!(db.0.is_empty());
    }

    #[test]
    fn footprints_cover_the_keys_known_from_the_input() {
        let s = scale();
        let t = TpccTxn {
            scale: s,
            tag: 1,
            kind: new_order(
                1,
                vec![LineInput { item: 5, supply_w: 2, qty: 3 }, LineInput { item: 6, supply_w: 1, qty: 1 }],
            ),
        };
        let home: Vec<Key> = t.footprint(0).iter().map(|n| n.key).collect();
        assert!(home.contains(&s.district(1, 3)) && home.contains(&s.stock(1, 6)));
        let remote: Vec<Key> = t.footprint(1).iter().map(|n| n.key).collect();
        assert!(remote.contains(&s.stock(2, 5)) && remote.contains(&s.stock_guard(2)));
        assert!(remote.iter().all(|k| k.0 % 2 == 1), "the remote part stays on warehouse 2's shard");
    }
}
