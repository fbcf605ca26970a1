//! The crate's modules use each other without a cycle: leaf modules (layout, rings, free
//! lists, descriptors, regions, system calls) at the bottom, the session's core, the
//! control frames and the reader above them, sessions and streams on top. Test code
//! counts too. How the uses are read: the `module-graph` crate. Run with `--nocapture`
//! to see the graph.

use module_graph::{Code, Graph};
use std::path::Path;

#[test]
fn modules_use_each_other_without_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src, Code::WithTests).unwrap();
    println!("{graph}");
    assert!(
        graph.uses("session").count() > 0,
        "no paths found:\n{graph}"
    );
    if let Some(cycle) = graph.cycle() {
        panic!(
            "the modules use each other in a circle: {}",
            cycle.join(" -> ")
        );
    }
}
