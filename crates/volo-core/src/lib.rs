//! The RPC core: `Service` and `Layer`, framing, contexts; client and server to come.
//!
//! Built so far (issue 5 is under way):
//!
//! - [`service`]: `Service<Cx, Req>` with an `async fn call(&self, cx, req)`, `Layer`,
//!   `ServiceBuilder`, `service_fn` and `layer_fn`, in the shape Volo (motore) users know.
//! - [`tower`]: adapters to and from `tower::Service`, so tower's middleware can wrap
//!   these services.
//! - [`codec`]: TTHeader, Framed and Buffered framing over the Binary and Compact
//!   protocols, with detection from a connection's first bytes and size limits.
//!
//! Still to come: contexts and metainfo, the server and client, transports over
//! netpoll-rs, shm-ipc and plain tokio.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod client;
pub mod codec;
pub mod context;
pub mod server;
pub mod service;
#[cfg(test)]
mod test_support;
pub mod tower;
pub mod transport;
