//! A run: the IDL read, then the list printed, the call made or the stream run.

use std::future::Future;
use std::io::{Read, Write};

use thrift_dynamic::{Descriptor, ServiceDesc, StreamingMode};
use thrift_generic::{GenericClient, GenericError};
use volo_core::client::{Client, ClientConfig, ClientContext, RetryPolicy};
use volo_core::context::Address;
use volo_core::transport::TransportKind;
use volo_core::transport::tls::ClientTls;

use crate::args::{self, Cli, ProtocolArg, TransportArg};
use crate::failure::Failure;
use crate::stream::{Requests, StreamCall};

/// Runs the command line: `--list`, or one call.
pub(crate) fn run(cli: Cli) -> Result<(), Failure> {
    let desc = Descriptor::from_files(&cli.idl, &cli.include)
        .map_err(|e| Failure::usage(format!("reading the IDL: {e}")))?;
    if cli.list {
        let mut out = String::new();
        for service in desc.services() {
            let name = listed_name(&desc, service);
            let methods = service.methods.iter().map(|m| &m.name);
            for m in methods.chain(service.streams.iter().map(|m| &m.name)) {
                out.push_str(&format!("{name}.{m}\n"));
            }
        }
        return print(out.as_bytes());
    }
    // clap asks for both unless --list is given.
    let (Some(addr), Some(target)) = (cli.addr.as_deref(), cli.target.as_deref()) else {
        return Err(Failure::usage("ADDR and SERVICE.METHOD are needed"));
    };
    let Some((service, method)) = target.rsplit_once('.') else {
        return Err(Failure::usage(format!(
            "{target:?} names no method: expected SERVICE.METHOD"
        )));
    };
    let service_desc = desc.service(service).ok_or_else(|| {
        let known: Vec<String> = desc
            .services()
            .iter()
            .map(|s| listed_name(&desc, s))
            .collect();
        Failure::usage(format!(
            "the IDL has no service {service:?} (it has: {})",
            known.join(", ")
        ))
    })?;
    let stream = service_desc.stream(method).map(|m| m.mode);
    if service_desc.method(method).is_none() && stream.is_none() {
        return Err(Failure::from_call(GenericError::UnknownMethod {
            service: service.to_string(),
            method: method.to_string(),
        }));
    }
    let addr = args::address(addr).map_err(Failure::usage)?;
    if let Some(mode) = stream {
        stream_flags(&cli, method, mode)?;
    }
    if !cli.meta.is_empty() && !cli.transport.has_header() {
        return Err(Failure::usage(
            "metainfo (-H) travels in a header: use --transport ttheader or theader",
        ));
    }
    let tls = client_tls(&cli, &addr)?;

    let mut config = ClientConfig::default();
    config.format.framing = cli.transport.framing();
    config.format.protocol = cli.protocol.protocol();
    config.timeouts.connect = cli.timeout;
    config.timeouts.rpc = Some(cli.timeout);
    config.transport.kind = TransportKind::Tokio;
    config.tls = tls;
    if let Some(mode) = stream {
        // A server stream's request is read whole, as a call's arguments; the
        // requests of the others as they come.
        let given = cli.json.as_deref().filter(|j| *j != "-");
        let (request, requests) = match (mode, given) {
            (StreamingMode::Server, _) => (arguments(cli.json.as_deref())?, Requests::Stdin),
            (_, Some(text)) => (Vec::new(), Requests::Given(text.as_bytes().to_vec())),
            (_, None) => (Vec::new(), Requests::Stdin),
        };
        let call = StreamCall {
            desc: desc.clone(),
            service: service.to_string(),
            bare_service: service_desc.name.clone(),
            method: method.to_string(),
            mode,
            addr,
            config,
            timeout: cli.timeout,
            meta: cli.meta,
            request,
            requests,
        };
        return block_on(call.run());
    }
    let json = arguments(cli.json.as_deref())?;
    let call = Call {
        desc: desc.clone(),
        service: service.to_string(),
        bare_service: service_desc.name.clone(),
        method: method.to_string(),
        addr,
        config,
        multiplexed: cli.multiplexed,
        meta: cli.meta,
        json,
    };

    block_on(async { print(&call.make().await?).map_err(Failed::Judged) })
}

/// Runs `work` on a runtime of one thread, and says how it failed.
fn block_on(work: impl Future<Output = Result<(), Failed>>) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(format!("starting the runtime: {e}")))?;
    match runtime.block_on(work) {
        Ok(()) => Ok(()),
        Err(Failed::Judged(failure)) => Err(failure),
        Err(Failed::Call(e)) => {
            if let GenericError::DeclaredJson { json, .. } = &e {
                print(json)?;
            }
            Err(Failure::from_call(e))
        }
    }
}

/// Refuses the flags a stream cannot follow: streams are TTHeader and Binary, and
/// name their service in their header.
fn stream_flags(cli: &Cli, method: &str, mode: StreamingMode) -> Result<(), Failure> {
    let refused = if cli.transport != TransportArg::Ttheader {
        "--transport"
    } else if cli.protocol != ProtocolArg::Binary {
        "--protocol"
    } else if cli.multiplexed {
        "--multiplexed"
    } else {
        return Ok(());
    };
    Err(Failure::usage(format!(
        "{method} is a {mode} stream, which travels over TTHeader in Binary and names its \
         service in its header: {refused} does not apply"
    )))
}

/// A service's name in `--list` and in messages: the bare name, unless another file
/// defines a service of that name (then `module.Name`).
fn listed_name(desc: &Descriptor, service: &ServiceDesc) -> String {
    match desc.service(&service.name) {
        Some(found) if std::ptr::eq(found, service) => service.name.clone(),
        _ => format!("{}.{}", service.module, service.name),
    }
}

/// The TLS settings of `--tls` and its companions.
fn client_tls(cli: &Cli, addr: &Address) -> Result<Option<ClientTls>, Failure> {
    if !cli.tls {
        return Ok(None);
    }
    if !addr.is_tcp() {
        return Err(Failure::usage(format!(
            "--tls needs a host:port address; {addr} would be called in the clear"
        )));
    }
    let Some(ca) = &cli.ca else {
        return Err(Failure::usage("--tls needs --ca FILE"));
    };
    let mut builder = ClientTls::builder(ca);
    if let (Some(cert), Some(key)) = (&cli.cert, &cli.key) {
        builder = builder.client_cert(cert, key);
    }
    if let Some(name) = &cli.server_name {
        builder = builder.server_name(name.clone());
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| Failure::usage(format!("TLS settings: {e}")))
}

/// The arguments' JSON: as given, or read from stdin for `-` or none; blank input
/// is `{}`.
fn arguments(given: Option<&str>) -> Result<Vec<u8>, Failure> {
    let mut json = match given {
        Some(text) if text != "-" => text.as_bytes().to_vec(),
        _ => {
            let mut read = Vec::new();
            std::io::stdin()
                .read_to_end(&mut read)
                .map_err(|e| Failure::usage(format!("reading the arguments from stdin: {e}")))?;
            read
        }
    };
    if json.iter().all(u8::is_ascii_whitespace) {
        json = b"{}".to_vec();
    }
    Ok(json)
}

/// Writes `json` and a newline on stdout, at once.
pub(crate) fn print(json: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let mut line = Vec::with_capacity(json.len() + 1);
    line.extend_from_slice(json);
    if !line.ends_with(b"\n") {
        line.push(b'\n');
    }
    out.write_all(&line)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::transport(format!("writing to stdout: {e}")))
}

/// One call, everything about it settled.
struct Call {
    desc: Descriptor,
    /// As the user spelled it (bare or qualified).
    service: String,
    /// The IDL's bare name: the callee's name, and the multiplexing prefix.
    bare_service: String,
    method: String,
    addr: Address,
    config: ClientConfig,
    multiplexed: bool,
    meta: Vec<(String, String)>,
    json: Vec<u8>,
}

/// Why a call or a stream failed: a failure already judged (the client could not
/// be made, a line that is not a request, stdout closed), or the call's own.
pub(crate) enum Failed {
    Judged(Failure),
    Call(GenericError),
}

impl From<GenericError> for Failed {
    fn from(e: GenericError) -> Self {
        Failed::Call(e)
    }
}

impl Call {
    /// Makes the call (inside the runtime: the client's transport needs it).
    async fn make(self) -> Result<Vec<u8>, Failed> {
        let protocol = self.config.format.protocol;
        let mut builder = Client::builder(self.bare_service.clone())
            .address(self.addr)
            .config(self.config)
            // A call made by hand is made once; its failure is shown as it happened.
            .retry(RetryPolicy::new().max_retries(0));
        if self.multiplexed {
            builder = builder.multiplexed_service(self.bare_service);
        }
        let client = builder
            .build()
            .map_err(|e| Failed::Judged(Failure::usage(format!("making the client: {e}"))))?;
        let client = GenericClient::new(client, self.desc, &self.service)?.with_protocol(protocol);
        let mut cx = ClientContext::new();
        for (k, v) in self.meta {
            cx.metainfo.set_transient(k, v);
        }
        let reply = client.call_json(&mut cx, &self.method, &self.json).await?;
        Ok(reply.to_vec())
    }
}
