//! Declares `cfg(loom)` (the loom models of the queue and free lists) so that
//! `unexpected_cfgs` knows it while the crate keeps the workspace's lints.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
