//! Strongly connected components (Tarjan) and a topological order of them,
//! deterministic for a given adjacency order. Detock and SLOG's deadlock
//! resolution for multi-home transactions find the cycles of a dependency
//! graph and break them the same way at every replica; a deterministic
//! scheduler orders what remains topologically.
//!
//! Iterative, so a long dependency chain cannot overflow the stack.

/// The strongly connected components of the graph with nodes `0..n` and
/// successors `succ(v)`, each component's nodes in ascending order, the
/// components in reverse topological order (every edge between two
/// components goes from a later one in the list to an earlier one — the
/// order Tarjan's algorithm finds them in).
pub fn tarjan_scc<'a>(n: usize, succ: impl Fn(usize) -> &'a [usize]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next_index = 0;
    let mut sccs = Vec::new();
    // (node, next successor position to visit)
    let mut work: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        work.push((root, 0));
        while let Some((v, i)) = work.pop() {
            if i == 0 {
                index[v] = next_index;
                low[v] = next_index;
                next_index += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            let succs = succ(v);
            if let Some(&w) = succs.get(i) {
                assert!(w < n, "successor {w} of {v} out of range");
                work.push((v, i + 1));
                if index[w] == UNSEEN {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            // Every successor visited: propagate to the parent, close a root.
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("the root is on the stack");
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                comp.sort_unstable();
                sccs.push(comp);
            }
        }
    }
    sccs
}

/// The components of [`tarjan_scc`] in topological order (every edge
/// between components goes forward).
pub fn topological_components<'a>(n: usize, succ: impl Fn(usize) -> &'a [usize]) -> Vec<Vec<usize>> {
    let mut sccs = tarjan_scc(n, succ);
    sccs.reverse();
    sccs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn components(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
        tarjan_scc(adj.len(), |v| &adj[v])
    }

    #[test]
    fn cycles_become_one_component_and_the_rest_stay_single() {
        // 0 → 1 → 2 → 0 is a cycle; 2 → 3 → 4 → 3 another; 5 alone.
        let adj = [vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut c = components(&adj);
        c.sort();
        assert_eq!(c, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
    }

    #[test]
    fn components_come_in_an_order_every_edge_respects() {
        let adj = [vec![1, 4], vec![2], vec![1, 3], vec![], vec![3, 0]];
        let order = topological_components(adj.len(), |v| &adj[v]);
        let pos = |v: usize| order.iter().position(|c| c.contains(&v)).expect("every node in a component");
        for (v, succs) in adj.iter().enumerate() {
            for &w in succs {
                assert!(pos(v) <= pos(w), "edge {v} → {w} goes forward");
            }
        }
        assert_eq!(order.iter().map(Vec::len).sum::<usize>(), adj.len());
    }

    #[test]
    fn the_same_graph_gives_the_same_components_every_time() {
        let adj: Vec<Vec<usize>> = (0..50).map(|v| vec![(v * 7 + 3) % 50, (v * 11 + 1) % 50]).collect();
        assert_eq!(components(&adj), components(&adj));
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let adj: Vec<Vec<usize>> = (0..n).map(|v| if v + 1 < n { vec![v + 1] } else { vec![0] }).collect();
        let c = components(&adj);
        assert_eq!(c.len(), 1, "one cycle through every node");
        assert_eq!(c[0].len(), n);
    }
}
