//! Shared-memory IPC for machine-local calls, in the model of shmipc.
//!
//! This crate is not written yet; it is reserved in the workspace so that the layout
//! and the dependency graph are fixed from the start. When it lands it will hold:
//!
//! - sessions whose data travels through a `memfd` mapping shared over a Unix socket
//!   (`SCM_RIGHTS`), with control frames and wake-ups on the socket;
//! - a buffer manager and an IO queue in the shared region, bounds-checked against an
//!   untrusted peer;
//! - a volo-core transport, so a service moves to shared memory by changing an address.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
