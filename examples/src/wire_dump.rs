//! Prints how an echo `Request` (and the call envelope around it) looks on the wire in
//! the Binary and Compact protocols, then decodes each dump back to prove the round trip.
//!
//! `cargo run -p examples --bin wire-dump -- [ACTION] [MSG]` (`--help` says more).

use clap::Parser;
use thrift_codec::fixtures::echo::Request;
use thrift_codec::{
    Binary, Codec, Compact, LinkBuffer, MessageHeader, MessageType, Protocol, Utf8Bytes,
};

fn dump<P: Protocol>(label: &str, header: &MessageHeader, req: &Request) -> Result<(), String> {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec
        .encode_message(header, req, &mut buf)
        .map_err(|e| e.to_string())?;
    let frame = buf.next(n);
    println!("{label} ({n} bytes):");
    for line in frame.chunks(16) {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = line
            .iter()
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        println!("  {:<48} {text}", hex.join(" "));
    }
    let (back_header, back): (MessageHeader, Request) =
        codec.decode_message(frame).map_err(|e| e.to_string())?;
    if &back_header != header || &back != req {
        return Err(format!("{label}: round trip changed the value"));
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
    let result = dump::<Binary>("Binary", &header, &req)
        .and_then(|()| dump::<Compact>("Compact", &header, &req));
    if let Err(e) = result {
        eprintln!("wire-dump: {e}");
        std::process::exit(1);
    }
}
