//! Directed graphs in compressed sparse row form, with an iterative Tarjan
//! (no recursion, so half a million vertices cannot overflow the stack) and
//! a breadth-first search for shortest cycles; both reuse their buffers so
//! that many small searches inside one big graph stay cheap.

use std::collections::VecDeque;

/// An edge: relation bits and a tag (what caused it, for explanations).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct Edge {
    pub from: u32,
    pub to: u32,
    pub rel: u8,
    pub tag: u32,
}

pub(crate) struct Csr {
    off: Vec<u32>,
    pub to: Vec<u32>,
    pub rel: Vec<u8>,
    pub tag: Vec<u32>,
    /// Source of each edge, so paths can be rebuilt from edge ids.
    pub from: Vec<u32>,
}

impl Csr {
    /// Builds the graph; duplicate `(from, to, rel)` edges are merged,
    /// keeping the smallest tag. Self-loops are dropped. Edges are bucketed
    /// by source in linear time; only each vertex's own edges are sorted.
    pub fn build(nodes: usize, edges: Vec<Edge>) -> Csr {
        let mut count = vec![0u32; nodes + 1];
        for e in edges.iter().filter(|e| e.from != e.to) {
            count[e.from as usize + 1] += 1;
        }
        for i in 0..nodes {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut rows = vec![(0u32, 0u8, 0u32); count[nodes] as usize];
        for e in edges.iter().filter(|e| e.from != e.to) {
            rows[fill[e.from as usize] as usize] = (e.to, e.rel, e.tag);
            fill[e.from as usize] += 1;
        }
        drop(edges);
        let mut g = Csr {
            off: Vec::with_capacity(nodes + 1),
            to: Vec::with_capacity(rows.len()),
            rel: Vec::with_capacity(rows.len()),
            tag: Vec::with_capacity(rows.len()),
            from: Vec::with_capacity(rows.len()),
        };
        g.off.push(0);
        for v in 0..nodes {
            let row = &mut rows[count[v] as usize..count[v + 1] as usize];
            row.sort_unstable();
            let mut last = None;
            for &(to, rel, tag) in row.iter() {
                if last == Some((to, rel)) {
                    continue;
                }
                last = Some((to, rel));
                g.to.push(to);
                g.rel.push(rel);
                g.tag.push(tag);
                g.from.push(v as u32);
            }
            g.off.push(g.to.len() as u32);
        }
        g
    }

    pub fn nodes(&self) -> usize {
        self.off.len() - 1
    }

    pub fn edge_count(&self) -> usize {
        self.to.len()
    }

    /// Ids of the edges leaving `v`.
    pub fn out(&self, v: u32) -> std::ops::Range<usize> {
        self.off[v as usize] as usize..self.off[v as usize + 1] as usize
    }

    /// The same graph with every edge reversed (tags and relations kept).
    pub fn reversed(&self) -> Csr {
        let edges = (0..self.edge_count())
            .map(|e| Edge { from: self.to[e], to: self.from[e], rel: self.rel[e], tag: self.tag[e] })
            .collect();
        Csr::build(self.nodes(), edges)
    }
}

const UNSEEN: u32 = u32::MAX;

/// Strongly connected components, in the order Tarjan finds them: every
/// component comes after all components it has edges to (reverse
/// topological order).
pub(crate) struct Components {
    members: Vec<u32>,
    off: Vec<u32>,
}

impl Components {
    pub fn len(&self) -> usize {
        self.off.len() - 1
    }

    pub fn get(&self, c: usize) -> &[u32] {
        &self.members[self.off[c] as usize..self.off[c + 1] as usize]
    }

    /// Components with more than one vertex (graphs here have no self-loops).
    pub fn nontrivial(&self) -> impl Iterator<Item = &[u32]> + '_ {
        (0..self.len()).map(|c| self.get(c)).filter(|m| m.len() > 1)
    }
}

/// Tarjan's algorithm with reusable buffers.
pub(crate) struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    /// Component of each vertex visited by the last run.
    pub comp: Vec<u32>,
    stack: Vec<u32>,
    calls: Vec<(u32, usize)>,
    touched: Vec<u32>,
}

impl Tarjan {
    pub fn new(nodes: usize) -> Tarjan {
        Tarjan {
            index: vec![UNSEEN; nodes],
            low: vec![0; nodes],
            on_stack: vec![false; nodes],
            comp: vec![UNSEEN; nodes],
            stack: Vec::new(),
            calls: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// Components reachable from `starts` along edges for which `keep(edge)`
    /// holds. Cost is proportional to what is visited, not to the graph.
    pub fn run(&mut self, g: &Csr, starts: impl IntoIterator<Item = u32>, keep: impl Fn(usize) -> bool) -> Components {
        for &v in &self.touched {
            self.index[v as usize] = UNSEEN;
            self.comp[v as usize] = UNSEEN;
        }
        self.touched.clear();
        let mut out = Components { members: Vec::new(), off: vec![0] };
        let mut next = 0u32;
        for root in starts {
            if self.index[root as usize] == UNSEEN {
                self.visit(g, root, &keep, &mut next, &mut out);
            }
        }
        out
    }

    fn enter(&mut self, g: &Csr, v: u32, next: &mut u32) {
        let i = v as usize;
        self.index[i] = *next;
        self.low[i] = *next;
        *next += 1;
        self.stack.push(v);
        self.on_stack[i] = true;
        self.touched.push(v);
        self.calls.push((v, g.out(v).start));
    }

    fn visit(&mut self, g: &Csr, root: u32, keep: &impl Fn(usize) -> bool, next: &mut u32, out: &mut Components) {
        self.enter(g, root, next);
        while let Some(&(v, pos)) = self.calls.last() {
            let end = g.out(v).end;
            let mut e = pos;
            let mut child = None;
            while e < end {
                let edge = e;
                e += 1;
                if !keep(edge) {
                    continue;
                }
                let w = g.to[edge] as usize;
                if self.index[w] == UNSEEN {
                    child = Some(w as u32);
                    break;
                } else if self.on_stack[w] {
                    self.low[v as usize] = self.low[v as usize].min(self.index[w]);
                }
            }
            if let Some(top) = self.calls.last_mut() {
                top.1 = e;
            }
            if let Some(w) = child {
                self.enter(g, w, next);
                continue;
            }
            self.calls.pop();
            if let Some(&(parent, _)) = self.calls.last() {
                let low = self.low[v as usize];
                let p = &mut self.low[parent as usize];
                *p = (*p).min(low);
            }
            if self.low[v as usize] == self.index[v as usize] {
                self.pop_component(v, out);
            }
        }
    }

    fn pop_component(&mut self, v: u32, out: &mut Components) {
        let c = out.len() as u32;
        while let Some(w) = self.stack.pop() {
            self.on_stack[w as usize] = false;
            self.comp[w as usize] = c;
            out.members.push(w);
            if w == v {
                break;
            }
        }
        let start = out.off[c as usize] as usize;
        out.members[start..].sort_unstable();
        out.off.push(out.members.len() as u32);
    }
}

/// Breadth-first search with reusable buffers.
pub(crate) struct Bfs {
    stamp: Vec<u32>,
    generation: u32,
    via: Vec<u32>,
    queue: VecDeque<u32>,
}

impl Bfs {
    pub fn new(nodes: usize) -> Bfs {
        Bfs { stamp: vec![0; nodes], generation: 0, via: vec![0; nodes], queue: VecDeque::new() }
    }

    /// Searches from `src` along edges with `keep(edge)`, visiting vertices
    /// in order of distance; at each vertex `x`, `close(x)` may name an edge
    /// leaving `x` that ends the search. Returns the edges from `src` to
    /// that vertex followed by the closing edge. `budget` is decremented per
    /// edge examined; the search gives up (None) when it runs out.
    pub fn search(
        &mut self,
        g: &Csr,
        src: u32,
        keep: impl Fn(usize) -> bool,
        mut close: impl FnMut(u32) -> Option<usize>,
        budget: &mut u64,
    ) -> Option<Vec<usize>> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.queue.clear();
        self.stamp[src as usize] = self.generation;
        self.via[src as usize] = u32::MAX;
        self.queue.push_back(src);
        while let Some(x) = self.queue.pop_front() {
            if let Some(closing) = close(x) {
                let mut path = vec![closing];
                let mut y = x;
                while self.via[y as usize] != u32::MAX {
                    let e = self.via[y as usize] as usize;
                    path.push(e);
                    y = g.from[e];
                }
                path.reverse();
                return Some(path);
            }
            for e in g.out(x) {
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                let w = g.to[e] as usize;
                if self.stamp[w] != self.generation && keep(e) {
                    self.stamp[w] = self.generation;
                    self.via[w] = e as u32;
                    self.queue.push_back(w as u32);
                }
            }
        }
        None
    }

    /// A shortest cycle through `v` using kept edges, as edge ids.
    pub fn cycle_through(
        &mut self,
        g: &Csr,
        v: u32,
        keep: impl Fn(usize) -> bool + Copy,
        budget: &mut u64,
    ) -> Option<Vec<usize>> {
        let back = |x: u32| g.out(x).find(|&e| g.to[e] == v && keep(e));
        self.search(g, v, keep, back, budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32, u8)]) -> Csr {
        Csr::build(n, edges.iter().map(|&(from, to, rel)| Edge { from, to, rel, tag: 0 }).collect())
    }

    #[test]
    fn components_come_out_in_reverse_topological_order() {
        // 0 -> {1 <-> 2} -> 3, 4 alone
        let g = graph(5, &[(0, 1, 1), (1, 2, 1), (2, 1, 1), (2, 3, 1)]);
        let mut t = Tarjan::new(5);
        let c = t.run(&g, 0..5, |_| true);
        let comps: Vec<&[u32]> = (0..c.len()).map(|i| c.get(i)).collect();
        assert_eq!(comps, [&[3][..], &[1, 2], &[0], &[4]]);
        assert_eq!(c.nontrivial().count(), 1);
        assert_eq!(t.comp[1], t.comp[2]);
        // Filtering edges breaks the cycle; buffers are reused.
        let c = t.run(&g, 0..5, |e| g.to[e] != 1 || g.from[e] == 0);
        assert_eq!(c.nontrivial().count(), 0);
    }

    #[test]
    fn deep_chains_do_not_recurse() {
        let n = 1_000_000u32;
        let mut edges: Vec<(u32, u32, u8)> = (0..n - 1).map(|i| (i, i + 1, 1)).collect();
        edges.push((n - 1, 0, 1));
        let g = graph(n as usize, &edges);
        let c = Tarjan::new(n as usize).run(&g, 0..n, |_| true);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(0).len(), n as usize);
    }

    #[test]
    fn finds_shortest_cycle_and_respects_budget() {
        // Long cycle 0->1->2->3->0 and short one 0->4->0.
        let g = graph(5, &[(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 0, 1), (0, 4, 2), (4, 0, 2)]);
        let mut b = Bfs::new(5);
        let mut budget = 100;
        let c = b.cycle_through(&g, 0, |_| true, &mut budget).unwrap();
        let nodes: Vec<u32> = c.iter().map(|&e| g.from[e]).collect();
        assert_eq!(nodes, [0, 4]);
        let c = b.cycle_through(&g, 0, |e| g.rel[e] == 1, &mut budget).unwrap();
        assert_eq!(c.len(), 4);
        let mut tiny = 1;
        assert!(b.cycle_through(&g, 0, |_| true, &mut tiny).is_none());
        assert_eq!(g.reversed().out(0).len(), 2);
    }
}
