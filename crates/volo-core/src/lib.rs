//! The RPC core: `Service` and `Layer`, client and server, framing and governance.
//!
//! This crate is not written yet; it is reserved in the workspace so that the layout
//! and the dependency graph are fixed from the start. When it lands it will hold:
//!
//! - `Service<Cx, Req>` and `Layer<S>` in the shape Volo users know, with adapters to
//!   and from `tower::Service`;
//! - TTHeader, Framed and Buffered framing, detected per connection on the server;
//! - a client with pooling, multiplexing, timeouts, retries, load balancing and
//!   circuit breaking; a server with graceful shutdown;
//! - transports over netpoll-rs (TCP, UDS), shm-ipc and plain tokio TCP.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
