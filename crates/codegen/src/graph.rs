//! Graph helpers for the resolver: which structs sit on a cycle together (so the fields
//! between them are boxed), which structs reach a `double` (so they are not
//! orderable), and how long the chains of structs inside structs are. All run in time
//! linear in structs plus fields, and none recurses, so a chain of a hundred thousand
//! structs costs neither time nor stack.

/// The strongly connected component of every node of a directed graph given as
/// adjacency lists (Tarjan's algorithm with an explicit stack). Two nodes get the same
/// number exactly when each reaches the other.
pub(crate) fn components(edges: &[Vec<usize>]) -> Vec<usize> {
    let n = edges.len();
    let mut t = Tarjan {
        index: vec![UNSEEN; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        path: Vec::new(),
        next_index: 0,
    };
    let mut component = vec![UNSEEN; n];
    let mut next_component = 0;
    for root in 0..n {
        if t.index[root] != UNSEEN {
            continue;
        }
        t.enter(root);
        while let Some(&(v, done)) = t.path.last() {
            if let Some(&w) = edges[v].get(done) {
                if let Some(top) = t.path.last_mut() {
                    top.1 += 1;
                }
                if t.index[w] == UNSEEN {
                    t.enter(w);
                } else if t.on_stack[w] {
                    t.low[v] = t.low[v].min(t.index[w]);
                }
                continue;
            }
            t.path.pop();
            if let Some(&(parent, _)) = t.path.last() {
                t.low[parent] = t.low[parent].min(t.low[v]);
            }
            if t.low[v] == t.index[v] {
                while let Some(w) = t.stack.pop() {
                    t.on_stack[w] = false;
                    component[w] = next_component;
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

/// For every node, how many nodes the longest path from it passes through, a strongly
/// connected component counting as one (its nodes reach each other, and no path needs
/// to go round it twice).
pub(crate) fn chain_lengths(edges: &[Vec<usize>]) -> Vec<usize> {
    let component = components(edges);
    let count = component.iter().max().map_or(0, |&m| m + 1);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (v, &c) in component.iter().enumerate() {
        members[c].push(v);
    }
    // Tarjan's algorithm numbers a component only once every component it reaches is
    // numbered: the ones an edge leads to are all lower, and known by now.
    let mut length = vec![0usize; count];
    for c in 0..count {
        let after = members[c]
            .iter()
            .flat_map(|&v| &edges[v])
            .map(|&w| component[w])
            .filter(|&d| d < c)
            .map(|d| length[d])
            .max()
            .unwrap_or(0);
        length[c] = after + 1;
    }
    component.iter().map(|&c| length[c]).collect()
}

const UNSEEN: usize = usize::MAX;

/// The working state of [`components`].
struct Tarjan {
    /// Visit order of each node (`UNSEEN` before its visit).
    index: Vec<usize>,
    /// The lowest visit order reachable from the node's subtree within its component.
    low: Vec<usize>,
    on_stack: Vec<bool>,
    /// Visited nodes whose component is not yet known.
    stack: Vec<usize>,
    /// The depth-first path: (node, how many of its edges are done).
    path: Vec<(usize, usize)>,
    next_index: usize,
}

impl Tarjan {
    fn enter(&mut self, v: usize) {
        self.index[v] = self.next_index;
        self.low[v] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        self.path.push((v, 0));
    }
}

/// Every node that reaches (in zero or more steps) a node of `marked`, given adjacency
/// lists: `marked` spread backwards along the edges.
pub(crate) fn reaching(edges: &[Vec<usize>], marked: &[bool]) -> Vec<bool> {
    let mut reverse: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (from, targets) in edges.iter().enumerate() {
        for &to in targets {
            reverse[to].push(from);
        }
    }
    let mut out = marked.to_vec();
    let mut queue: Vec<usize> = (0..out.len()).filter(|&v| out[v]).collect();
    while let Some(v) = queue.pop() {
        for &from in &reverse[v] {
            if !out[from] {
                out[from] = true;
                queue.push(from);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(c: &[usize], a: usize, b: usize) -> bool {
        c[a] == c[b]
    }

    #[test]
    fn cycles_share_a_component_and_chains_do_not() {
        // 0 -> 1 -> 2 -> 0 is a cycle; 3 -> 0 only leads into it; 4 loops on itself;
        // 5 -> 6 is a plain chain.
        let edges = vec![vec![1], vec![2], vec![0], vec![0], vec![4], vec![6], vec![]];
        let c = components(&edges);
        assert!(same(&c, 0, 1) && same(&c, 1, 2));
        assert!(!same(&c, 3, 0));
        assert!(!same(&c, 4, 3) && !same(&c, 4, 0));
        assert!(!same(&c, 5, 6));
        let mut distinct = c.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 5, "{{0,1,2}}, {{3}}, {{4}}, {{5}}, {{6}}");
    }

    #[test]
    fn chains_count_their_nodes_and_a_cycle_once() {
        // 3 -> 0 -> 1 -> 2 -> 0 (a cycle of three), 4 -> 3, and 5 alone; 6 -> 7 and
        // 6 -> 8 -> 7: the longer way counts.
        let edges = vec![
            vec![1],
            vec![2],
            vec![0],
            vec![0],
            vec![3],
            vec![],
            vec![7, 8],
            vec![],
            vec![7],
        ];
        assert_eq!(chain_lengths(&edges), [1, 1, 1, 2, 3, 1, 3, 1, 2]);
        // A chain of a hundred thousand: no recursion, no overflow.
        let n = 100_000;
        let chain: Vec<Vec<usize>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        assert_eq!(chain_lengths(&chain)[0], n);
    }

    #[test]
    fn two_cycles_joined_one_way_stay_apart() {
        // 0 <-> 1, 2 <-> 3, and 1 -> 2: two components.
        let edges = vec![vec![1], vec![0, 2], vec![3], vec![2]];
        let c = components(&edges);
        assert!(same(&c, 0, 1) && same(&c, 2, 3) && !same(&c, 1, 2));
    }

    #[test]
    fn a_long_chain_and_a_long_cycle_need_no_deep_stack() {
        let n = 200_000;
        let chain: Vec<Vec<usize>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        let c = components(&chain);
        assert!((1..n).all(|i| c[i] != c[i - 1]));

        let cycle: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let c = components(&cycle);
        assert!(c.iter().all(|&x| x == c[0]));
    }

    #[test]
    fn reaching_spreads_backwards_only() {
        // 0 -> 1 -> 2 (marked), 3 -> 0, 4 alone, 2 -> 5.
        let edges = vec![vec![1], vec![2], vec![5], vec![0], vec![], vec![]];
        let marked = [false, false, true, false, false, false];
        assert_eq!(
            reaching(&edges, &marked),
            [true, true, true, true, false, false]
        );
    }
}
