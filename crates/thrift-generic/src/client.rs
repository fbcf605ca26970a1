//! The generic client.

use std::sync::Arc;

use bytes::Bytes;
use thrift_dynamic::value::{self, Checked, StructValue, Value, ValueError};
use thrift_dynamic::{Descriptor, IdlProvider, MethodDesc, StructId, ThriftProtocol};
use thrift_wire::{Binary, Compact, Encoder, Json, LinkBuffer, MessageHeader, Sizer, Utf8Bytes};
use volo_core::client::{Client, ClientContext, ClientRequest, ClientResponse, Error, MethodName};
use volo_core::codec::{Body, Encoded, ErasedBody, FrameError, FrameOut, Protocol};
use volo_core::service::Service;

use crate::error::GenericError;

/// Where a generic client reads its IDL.
#[derive(Debug, Clone)]
pub enum Idl {
    /// One descriptor, for the client's life.
    Fixed(Descriptor),
    /// The provider's current descriptor, read again by each call.
    Watched(Arc<IdlProvider>),
}

impl Idl {
    /// The descriptor a call goes by.
    pub fn current(&self) -> Descriptor {
        match self {
            Idl::Fixed(d) => d.clone(),
            Idl::Watched(p) => p.current(),
        }
    }

    /// The bare name of `service` (bare or qualified) in the current descriptor.
    pub(crate) fn service_name(&self, service: &str) -> Result<String, GenericError> {
        self.current()
            .service(service)
            .map(|s| s.name.clone())
            .ok_or_else(|| GenericError::UnknownService(service.to_string()))
    }
}

impl From<Descriptor> for Idl {
    fn from(d: Descriptor) -> Self {
        Idl::Fixed(d)
    }
}

impl From<Arc<IdlProvider>> for Idl {
    fn from(p: Arc<IdlProvider>) -> Self {
        Idl::Watched(p)
    }
}

/// A client of one IDL service whose calls are made without generated code: see the
/// [crate docs](crate). Cheap to clone when the client is.
#[derive(Debug, Clone)]
pub struct GenericClient<S> {
    client: Client<S>,
    idl: Idl,
    service: String,
    protocol: Protocol,
}

impl<S> GenericClient<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>,
{
    /// Calls of `service` (its IDL name, `module.Name` or the bare name when only one
    /// file defines it) through `client`. Fails when the IDL has no such service now;
    /// a later reload that drops it fails the calls instead.
    pub fn new(
        client: Client<S>,
        idl: impl Into<Idl>,
        service: &str,
    ) -> Result<Self, GenericError> {
        let idl = idl.into();
        idl.service_name(service)?;
        Ok(GenericClient {
            client,
            idl,
            service: service.to_string(),
            protocol: Protocol::Binary,
        })
    }

    /// Says which protocol the client's stack writes (its
    /// `ClientConfig::format.protocol`; Binary, the default, when not set): the
    /// protocol [`call_json`](Self::call_json) transcodes the arguments into, ahead of
    /// the call. A stack that writes another protocol still gets correct bytes, at the
    /// cost of a decode and an encode more per call.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The client underneath.
    pub fn client(&self) -> &Client<S> {
        &self.client
    }

    /// The descriptor a call made now goes by.
    pub fn descriptor(&self) -> Descriptor {
        self.idl.current()
    }

    /// Sends `args`, the encoded arguments struct of `method` in the client's
    /// protocol, as they are; gives back the reply's encoded result struct as it came
    /// (empty for a oneway method, which gets no reply). The bytes are not checked
    /// against the IDL either way: the server judges the arguments.
    pub async fn call_binary(
        &self,
        cx: &mut ClientContext,
        method: &str,
        args: Bytes,
    ) -> Result<Bytes, GenericError> {
        let desc = self.idl.current();
        let m = self.method(&desc, method)?;
        let reply = self.client.send(cx, request(m, Encoded(args))).await?;
        Ok(reply.encoded().clone())
    }

    /// Calls `method` with `args` (its arguments struct by field id), checked against
    /// the IDL before anything is sent. Gives back the return value (`None` for `void`
    /// and oneway methods), or [`GenericError::Declared`] when the method threw a
    /// declared exception.
    pub async fn call_value(
        &self,
        cx: &mut ClientContext,
        method: &str,
        args: StructValue,
    ) -> Result<Option<Value>, GenericError> {
        let desc = self.idl.current();
        let m = self.method(&desc, method)?;
        let checked = Checked::new(&desc, m.args, args).map_err(|source| GenericError::Args {
            method: m.name.clone(),
            source,
        })?;
        let reply = self.client.send(cx, request(m, ValueArgs(checked))).await?;
        let Some(result) = m.result else {
            return Ok(None);
        };
        let bytes = reply.encoded().clone();
        let read = match reply.protocol() {
            Protocol::Binary => value::decode_struct::<Binary>(&desc, result, bytes),
            Protocol::Compact => value::decode_struct::<Compact>(&desc, result, bytes),
            Protocol::Json => value::decode_struct::<Json>(&desc, result, bytes),
        };
        let result = read.map_err(|source| GenericError::Reply {
            method: m.name.clone(),
            source,
        })?;
        answer(&desc, m, result)
    }

    /// Calls `method` with `args`, its arguments as a JSON object keyed by field name
    /// (the conventions of [`thrift_dynamic::json`]), transcoded into Thrift before
    /// anything is sent. Gives back the return value as JSON text (`null` for `void`
    /// and oneway methods), or [`GenericError::DeclaredJson`] carrying the declared
    /// exception's JSON when the method threw one.
    pub async fn call_json(
        &self,
        cx: &mut ClientContext,
        method: &str,
        args: &[u8],
    ) -> Result<Bytes, GenericError> {
        self.json_call(cx, method, args, false).await
    }

    /// Calls `method`, which takes one argument, with `arg`, that argument's value as
    /// JSON (`{"action":"a","msg":"b"}` for `echo(1: Request req)`, where
    /// [`call_json`](Self::call_json) takes `{"req":{...}}`): the form of Kitex's JSON
    /// generic call, so a Kitex gateway's request bodies go through unchanged. The
    /// reply is as `call_json`'s. A method with no argument, or with several, is
    /// [`GenericError::NotOneArgument`] (nothing is sent).
    pub async fn call_json_arg(
        &self,
        cx: &mut ClientContext,
        method: &str,
        arg: &[u8],
    ) -> Result<Bytes, GenericError> {
        self.json_call(cx, method, arg, true).await
    }

    async fn json_call(
        &self,
        cx: &mut ClientContext,
        method: &str,
        args: &[u8],
        one_arg: bool,
    ) -> Result<Bytes, GenericError> {
        let desc = self.idl.current();
        let m = self.method(&desc, method)?;
        let only = match (one_arg, desc.struct_desc(m.args).fields.as_slice()) {
            (false, _) => None,
            (true, [f]) => Some(f.id),
            (true, fields) => {
                return Err(GenericError::NotOneArgument {
                    method: m.name.clone(),
                    count: fields.len(),
                });
            }
        };
        let body = JsonArgs::new(&desc, m.args, only, args, self.protocol).map_err(|source| {
            GenericError::JsonArgs {
                method: m.name.clone(),
                source,
            }
        })?;
        let reply = self.client.send(cx, request(m, body)).await?;
        let Some(result) = m.result else {
            return Ok(Bytes::from_static(b"null"));
        };
        let reply_err = |source| GenericError::JsonReply {
            method: m.name.clone(),
            source,
        };
        let (bytes, protocol) = match reply.protocol() {
            Protocol::Binary => (reply.encoded().clone(), ThriftProtocol::Binary),
            Protocol::Compact => (reply.encoded().clone(), ThriftProtocol::Compact),
            // Apache's JSON protocol: read through a value, then Binary.
            Protocol::Json => {
                let v = value::decode_struct::<Json>(&desc, result, reply.encoded().clone())
                    .map_err(|source| GenericError::Reply {
                        method: m.name.clone(),
                        source,
                    })?;
                let b = value::encode_struct::<Binary>(&desc, result, &v).map_err(|source| {
                    GenericError::Reply {
                        method: m.name.clone(),
                        source,
                    }
                })?;
                (b, ThriftProtocol::Binary)
            }
        };
        let mut json = Vec::new();
        let carried = thrift_dynamic::result_to_json(&desc, result, bytes, protocol, &mut json)
            .map_err(reply_err)?;
        match carried {
            Some(0) => Ok(Bytes::from(json)),
            Some(id) => {
                let (field, exception) = m
                    .throws
                    .iter()
                    .find(|t| t.id == id)
                    .map(|t| (t.name.clone(), desc.struct_desc(t.ty).name.clone()))
                    .unwrap_or_default();
                Err(GenericError::DeclaredJson {
                    method: m.name.clone(),
                    field,
                    exception,
                    json: Bytes::from(json),
                })
            }
            None if m.returns.is_none() => Ok(Bytes::from_static(b"null")),
            None => Err(GenericError::MissingResult(m.name.clone())),
        }
    }

    fn method<'d>(
        &self,
        desc: &'d Descriptor,
        method: &str,
    ) -> Result<&'d MethodDesc, GenericError> {
        let service = desc
            .service(&self.service)
            .ok_or_else(|| GenericError::UnknownService(self.service.clone()))?;
        if let Some(m) = service.method(method) {
            return Ok(m);
        }
        Err(match service.stream(method) {
            Some(s) => GenericError::Streaming {
                method: method.to_string(),
                mode: s.mode,
            },
            None => GenericError::UnknownMethod {
                service: self.service.clone(),
                method: method.to_string(),
            },
        })
    }
}

/// A call of `m` with `args`: oneway when the IDL says so.
fn request(m: &MethodDesc, args: impl ErasedBody) -> ClientRequest {
    let name = MethodName::from(Utf8Bytes::from(m.name.clone()));
    if m.oneway {
        ClientRequest::oneway(name, args)
    } else {
        ClientRequest::new(name, args)
    }
}

/// What a result struct says: the value in field 0, a declared exception, nothing
/// for `void`.
fn answer(
    desc: &Descriptor,
    m: &MethodDesc,
    result: StructValue,
) -> Result<Option<Value>, GenericError> {
    if let Some(v) = result.get(0) {
        return Ok(Some(v.clone()));
    }
    for t in &m.throws {
        if let Some(Value::Struct(e)) = result.get(t.id) {
            return Err(GenericError::Declared {
                method: m.name.clone(),
                field: t.name.clone(),
                exception: desc.struct_desc(t.ty).name.clone(),
                value: e.clone(),
            });
        }
    }
    match m.returns {
        None => Ok(None),
        Some(_) => Err(GenericError::MissingResult(m.name.clone())),
    }
}

/// Checked arguments as a call's body: written in the protocol the stack writes in.
struct ValueArgs(Checked);

impl Body for ValueArgs {
    fn size<Sz: Sizer>(&self, s: &mut Sz) -> usize {
        self.0.size(s)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        self.0.encode(e)
    }
}

/// A JSON call's arguments, transcoded into one protocol when the call was made.
struct JsonArgs {
    bytes: Bytes,
    protocol: Protocol,
    desc: Descriptor,
    ty: StructId,
}

impl JsonArgs {
    /// `json` as struct `ty` (the whole struct as an object, or, with `only`, the
    /// value of its one field of that id), in `protocol` (Apache's JSON protocol:
    /// through a value).
    fn new(
        desc: &Descriptor,
        ty: StructId,
        only: Option<i16>,
        json: &[u8],
        protocol: Protocol,
    ) -> Result<Self, thrift_dynamic::TranscodeError> {
        let into = match protocol {
            Protocol::Compact => ThriftProtocol::Compact,
            Protocol::Binary | Protocol::Json => ThriftProtocol::Binary,
        };
        let mut out = Vec::new();
        match only {
            None => thrift_dynamic::json_to_thrift(desc, ty, json, into, &mut out)?,
            Some(id) => thrift_dynamic::json_to_result(desc, ty, id, json, into, &mut out)?,
        }
        let (bytes, protocol) = match into {
            ThriftProtocol::Compact => (out.into(), Protocol::Compact),
            ThriftProtocol::Binary => (out.into(), Protocol::Binary),
        };
        Ok(JsonArgs {
            bytes,
            protocol,
            desc: desc.clone(),
            ty,
        })
    }

    /// The same struct as a checked value, for writing in another protocol.
    fn as_value(&self) -> Result<Checked, ValueError> {
        let v = match self.protocol {
            Protocol::Compact => {
                value::decode_struct::<Compact>(&self.desc, self.ty, self.bytes.clone())
            }
            _ => value::decode_struct::<Binary>(&self.desc, self.ty, self.bytes.clone()),
        }?;
        Checked::new(&self.desc, self.ty, v)
    }
}

impl ErasedBody for JsonArgs {
    fn write(
        &self,
        out: &mut LinkBuffer,
        protocol: Protocol,
        frame: &FrameOut<'_>,
        header: &MessageHeader,
        max: usize,
    ) -> Result<Result<(), usize>, FrameError> {
        if protocol == self.protocol {
            return Encoded(self.bytes.clone()).write(out, protocol, frame, header, max);
        }
        match self.as_value() {
            Ok(checked) => ValueArgs(checked).write(out, protocol, frame, header, max),
            Err(e) => Err(FrameError::Body(format!(
                "re-encoding JSON arguments made in {:?} for {protocol:?}: {e}",
                self.protocol
            ))),
        }
    }
}
