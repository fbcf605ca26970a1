//! The atomics that the queue and the free lists use: std's, or loom's under `cfg(loom)`
//! so the same code is model-checked (`RUSTFLAGS="--cfg loom" cargo test --lib loom`).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering, fence};
