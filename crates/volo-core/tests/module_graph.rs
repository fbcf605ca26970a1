//! The crate's modules use each other without a cycle, and the two sides meet only
//! in what lies below both: the client and the server use the shared modules
//! (framing in `codec`, the headers in `envelope`, `refusal`, `error_kind`, `registry`, `metrics`, `trace`,
//! `transport`, `context`, `clock`, `service`, `random`), never each other, and no
//! shared module uses either side. `tower_compat` adapts both and `codegen` re-exports both
//! for generated code: they sit on top.
//!
//! Test code does not count: a server's tests call it with the client. How the uses
//! are read: the `module-graph` crate. Run with `--nocapture` to see the graph.

use module_graph::{Code, Graph};
use std::path::Path;

fn shipped() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src, Code::WithoutTests).unwrap();
    println!("{graph}");
    assert!(graph.uses("client").count() > 0, "no paths found:\n{graph}");
    graph
}

#[test]
fn modules_use_each_other_without_a_cycle() {
    if let Some(cycle) = shipped().cycle() {
        panic!(
            "the modules use each other in a circle: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_sides_meet_only_below_both() {
    let graph = shipped();
    for (side, other) in [("client", "server"), ("server", "client")] {
        assert!(
            graph.uses(side).all(|m| m != other),
            "{side} uses {other}:\n{graph}"
        );
    }
    for module in graph.modules() {
        if ["client", "server", "tower_compat", "codegen"].contains(&module) {
            continue;
        }
        let sides: Vec<_> = graph
            .uses(module)
            .filter(|m| ["client", "server"].contains(m))
            .collect();
        assert!(sides.is_empty(), "{module} uses {sides:?}:\n{graph}");
    }
}
