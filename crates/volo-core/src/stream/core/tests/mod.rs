//! The core driven without sockets: a client core and a server core joined by two
//! buffers (a [`Pair`], in the manner of quinn-proto's test pair), or one core fed
//! frames written by hand (a Kitex peer), with a clock that moves only when a test
//! says so.

mod flow;
mod hostile;
mod lifecycle;

use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use thrift_wire::{LinkBuffer, Utf8Bytes};

use super::{Accepted, Event, Side, StreamCore};
use crate::stream::error::{Metadata, StreamError};
use crate::stream::frame::{Frame, FrameKind, FrameLimits, frame_len};
use crate::stream::{HandlerError, StreamConfig};

/// One end: its core, what it wrote and has not been delivered, and its events.
struct End {
    core: StreamCore,
    out: LinkBuffer,
    events: Vec<Event>,
}

impl End {
    fn new(side: Side, config: StreamConfig) -> Self {
        End {
            core: StreamCore::new(side, config),
            out: LinkBuffer::new(),
            events: Vec::new(),
        }
    }

    fn collect(&mut self) {
        while let Some(e) = self.core.poll_event() {
            self.events.push(e);
        }
    }

    /// Opens a stream of `method` (a client's) with no header pairs.
    fn open_stream(
        &mut self,
        method: &'static str,
        deadline: Option<Instant>,
    ) -> Result<i32, StreamError> {
        let method = Utf8Bytes::from_static(method);
        let header = Metadata::new();
        let id = self
            .core
            .open(&mut self.out, method, "Svc", &header, deadline);
        self.collect();
        id
    }

    /// Sends `payload` as one message on `id`.
    fn send(&mut self, id: i32, payload: &[u8], now: Instant) -> Poll<Result<(), StreamError>> {
        let r = self
            .core
            .send(&mut self.out, id, payload.len(), |o| o.write(payload), now);
        self.collect();
        r
    }

    /// Takes `id`'s next message.
    fn recv(&mut self, id: i32) -> Poll<Result<Option<Bytes>, StreamError>> {
        let r = self.core.recv(&mut self.out, id);
        self.collect();
        r
    }

    fn close(&mut self, id: i32, error: Option<&HandlerError>) -> Result<(), StreamError> {
        let r = self.core.close_send(&mut self.out, id, error, false);
        self.collect();
        r
    }

    fn reset(&mut self, id: i32, error: StreamError) {
        self.core.reset(&mut self.out, id, error);
        self.collect();
    }

    /// Feeds it `frame` as if it arrived.
    fn feed(&mut self, frame: &Frame) {
        let mut wire = LinkBuffer::new();
        frame.encode(&mut wire).expect("a frame within limits");
        let bytes = wire.next(wire.len());
        self.core
            .handle_input(&mut self.out, &bytes)
            .expect("a readable frame");
        self.collect();
    }

    /// The frames it wrote, taken.
    fn written(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(bytes) = cut(&mut self.out) {
            frames.push(Frame::decode(&bytes, &FrameLimits::default()).expect("a frame"));
        }
        frames
    }

    /// The streams opened at it since the last call, taken from its events.
    fn opened(&mut self) -> Vec<Accepted> {
        let mut opened = Vec::new();
        self.events.retain(|e| match e {
            Event::Opened(a) => {
                opened.push(a.clone());
                false
            }
            _ => true,
        });
        opened
    }

    fn saw(&self, event: &Event) -> bool {
        self.events.contains(event)
    }

    /// The outcome stream `id` ended with, if it left the table.
    fn outcome(&self, id: i32) -> Option<&'static str> {
        self.events.iter().find_map(|e| match e {
            Event::Ended { id: i, outcome } if *i == id => Some(*outcome),
            _ => None,
        })
    }
}

/// Hands `to` what `from` wrote, as long as it reads; whether anything moved.
fn deliver(from: &mut End, to: &mut End) -> bool {
    let mut moved = false;
    while to.core.wants_frame()
        && let Some(bytes) = cut(&mut from.out)
    {
        moved = true;
        // A frame that cannot be read fails the connection; tests of it look at the
        // core.
        let _ = to.core.handle_input(&mut to.out, &bytes);
        to.collect();
    }
    moved
}

/// The next whole frame in `out`, taken.
fn cut(out: &mut LinkBuffer) -> Option<Bytes> {
    let head = out.peek(4)?;
    let len = frame_len(head, &FrameLimits::default()).expect("a length within limits")?;
    (out.len() >= len).then(|| out.next(len))
}

/// A client core and a server core on one connection, and the time.
struct Pair {
    client: End,
    server: End,
    now: Instant,
}

impl Pair {
    fn new() -> Self {
        Pair::with(StreamConfig::default(), StreamConfig::default())
    }

    fn with(client: StreamConfig, server: StreamConfig) -> Self {
        Pair {
            client: End::new(Side::Client, client),
            server: End::new(Side::Server, server),
            now: Instant::now(),
        }
    }

    /// Delivers what each side wrote to the other until neither writes more (a
    /// side whose reader is held takes nothing until it is let go).
    fn drive(&mut self) {
        loop {
            let to_server = deliver(&mut self.client, &mut self.server);
            let to_client = deliver(&mut self.server, &mut self.client);
            if !to_server && !to_client {
                return;
            }
        }
    }

    /// Moves the clock by `d`, lets both cores act on it, and drives.
    fn advance(&mut self, d: Duration) {
        self.now += d;
        for end in [&mut self.client, &mut self.server] {
            end.core.handle_timeout(&mut end.out, self.now);
            end.collect();
        }
        self.drive();
    }

    /// Opens a stream of `method` at the client and delivers it: both ids (the same
    /// number).
    fn open(&mut self, method: &'static str) -> i32 {
        let id = self.client.open_stream(method, None).expect("opened");
        self.drive();
        let opened = self.server.opened();
        assert_eq!(opened.len(), 1, "the server saw the stream open");
        assert_eq!(opened[0].id, id);
        id
    }

    fn send(&mut self, side: Side, id: i32, payload: &[u8]) {
        let now = self.now;
        let end = self.end(side);
        assert_eq!(end.send(id, payload, now), Poll::Ready(Ok(())));
        self.drive();
    }

    fn end(&mut self, side: Side) -> &mut End {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }
}

fn message(bytes: &'static [u8]) -> Poll<Result<Option<Bytes>, StreamError>> {
    Poll::Ready(Ok(Some(Bytes::from_static(bytes))))
}

fn ended<T>() -> Poll<Result<Option<T>, StreamError>> {
    Poll::Ready(Ok(None))
}

/// A header frame as a Kitex client writes it: no window.
fn kitex_header(id: i32, method: &str) -> Frame {
    let mut frame = Frame::new(FrameKind::Header, id).with_method(method.to_owned());
    frame.meta.push((
        Utf8Bytes::from_static(crate::stream::frame::str_key::SERVICE),
        Utf8Bytes::from_static("Svc"),
    ));
    frame
}

fn data(id: i32, len: usize) -> Frame {
    Frame::new(FrameKind::Data, id)
        .with_method("Echo")
        .with_payload(Bytes::from(vec![1u8; len]))
}
