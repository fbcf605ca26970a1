//! Prints how an echo `Request` (and the call envelope around it) looks on the wire in
//! the Binary and Compact protocols, then decodes each dump back to prove the round trip.
//!
//! `cargo run -p examples --bin wire-dump -- [ACTION] [MSG]` (`--help` says more).

use std::io::Write;

use clap::Parser;
use thrift_wire::fixtures::echo::Request;
use thrift_wire::{
    Binary, Codec, Compact, LinkBuffer, MessageHeader, MessageType, Protocol, Utf8Bytes,
};

/// Why a dump stopped: its output failed (the reader went away, say), or the value did
/// not survive the round trip.
#[derive(Debug)]
enum Failure {
    Output(std::io::Error),
    Codec(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Output(e)
    }
}

fn dump<P: Protocol>(
    out: &mut impl Write,
    label: &str,
    header: &MessageHeader,
    req: &Request,
) -> Result<(), Failure> {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec
        .encode_message(header, req, &mut buf)
        .map_err(|e| Failure::Codec(e.to_string()))?;
    let frame = buf.next(n);
    writeln!(out, "{label} ({n} bytes):")?;
    for line in frame.chunks(16) {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = line
            .iter()
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        writeln!(out, "  {:<48} {text}", hex.join(" "))?;
    }
    out.flush()?;
    let (back_header, back): (MessageHeader, Request) = codec
        .decode_message(frame)
        .map_err(|e| Failure::Codec(e.to_string()))?;
    if &back_header != header || &back != req {
        return Err(Failure::Codec(format!(
            "{label}: round trip changed the value"
        )));
    }
    Ok(())
}

/// Prints an echo call's bytes in the Binary and Compact protocols, and decodes each
/// dump back to check the round trip.
#[derive(Debug, Parser)]
#[command(name = "wire-dump", version, args_override_self = true)]
struct Cli {
    /// The request's `action`.
    #[arg(default_value = "echo")]
    action: String,

    /// The request's `msg`.
    #[arg(default_value = "hello, thrift")]
    msg: String,
}

fn main() {
    let cli = Cli::parse();
    let req = Request {
        action: Utf8Bytes::from(cli.action),
        msg: Utf8Bytes::from(cli.msg),
    };
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 1,
    };
    let mut out = std::io::stdout().lock();
    let result = dump::<Binary>(&mut out, "Binary", &header, &req)
        .and_then(|()| dump::<Compact>(&mut out, "Compact", &header, &req));
    match result {
        Ok(()) => {}
        // The reader stopped reading (`wire-dump | head -1`): nothing left to do.
        Err(Failure::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(Failure::Output(e)) => {
            eprintln!("wire-dump: writing the dump: {e}");
            std::process::exit(1);
        }
        Err(Failure::Codec(e)) => {
            eprintln!("wire-dump: {e}");
            std::process::exit(1);
        }
    }
}
