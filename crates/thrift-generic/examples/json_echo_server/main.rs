//! `EchoService` of `idl/echo.thrift` served without generated code: a generic server
//! whose handler reads and writes JSON, with the semantics written in the IDL (what
//! `echo-server` answers, from a handler that knows nothing of the generated types).
//!
//! ```text
//! cargo run -p thrift-generic --example json_echo_server -- [ADDR] [IDL]
//! ```
//!
//! ADDR defaults to `127.0.0.1:9090` (`unix:/path` for a Unix socket), IDL to the
//! repository's `idl/echo.thrift`; the IDL is read again when its file changes. Any
//! client of the IDL calls it: a generated one, `thrift-call`, or Kitex's JSON generic
//! client.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thrift_dynamic::IdlProvider;
use thrift_generic::GenericService;
use volo_core::context::Address;
use volo_core::server::Server;

mod handler;

use handler::JsonEcho;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: Address = args.next().as_deref().unwrap_or("127.0.0.1:9090").parse()?;
    let idl = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift"),
        PathBuf::from,
    );
    let provider = Arc::new(IdlProvider::new(&[&idl], &[] as &[PathBuf])?);
    let _watch = provider.watch(Duration::from_secs(1));
    let service = GenericService::json(provider, "EchoService", JsonEcho)?;
    let facts = service.facts();
    let bound = Server::with_facts(service, facts).bind(&addr).await?;
    println!("json_echo_server: listening on {}", bound.local_addr());
    bound.serve().await?;
    Ok(())
}
