//! A mio-based epoll reactor in the manner of Kitex's Netpoll.
//!
//! This crate is not written yet; it is reserved in the workspace so that the layout
//! and the dependency graph are fixed from the start. When it lands it will hold:
//!
//! - poller threads, each owning a `mio::Poll`, with connections assigned round-robin
//!   and tokens that index a generation-checked slab;
//! - a latency-tuned poll loop (a zero-timeout re-poll after a busy batch);
//! - connections whose input and output are `thrift_codec::LinkBuffer` chains, with
//!   writes issued inline by `writev` and a high-water mark on input;
//! - an async face for tokio: await a whole frame, await the output draining.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
