//! Streaming calls over TTHeader, wire-compatible with Kitex's ("StreamX", Kitex
//! v0.12 on): server streams, client streams and bidirectional streams, many per
//! connection.
//!
//! This module holds the wire so far: [`frame`] reads and writes the frames, with
//! their limits and typed errors, and [`flow`] is the flow control of one stream (a
//! credit window that Kitex peers skip, and a bounded queue either way). The streams
//! themselves (the per-connection multiplexer, the client and server halves, the
//! generated methods) build on them.

pub mod flow;
pub mod frame;

pub use frame::{BizStatus, Frame, FrameError, FrameKind, FrameLimits};
