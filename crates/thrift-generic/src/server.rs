//! Generic serving: any method of an IDL read at run time, answered by one handler
//! that takes and gives JSON ([`JsonService`]) or values ([`ValueService`]): one
//! [`GenericService`] either way.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use thrift_dynamic::value::{self, Checked, StructValue, Value};
use thrift_dynamic::{Descriptor, MethodDesc, StructId, ThriftProtocol};
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Compact, Encoder, Json, Sizer,
    Utf8Bytes,
};
use volo_core::codec::{Body, Protocol};
use volo_core::context::ServerContext;
use volo_core::server::{DispatchError, ServerRequest, ServiceFacts};
use volo_core::service::Service;

use crate::client::Idl;
use crate::error::GenericError;

/// One call as a JSON handler gets it.
#[derive(Debug, Clone)]
pub struct JsonCall {
    /// The method's name.
    pub method: Utf8Bytes,
    /// The arguments struct as a JSON object keyed by field name (the conventions of
    /// [`thrift_dynamic::json`]).
    pub args: Bytes,
}

/// One call as a value handler gets it.
#[derive(Debug, Clone)]
pub struct ValueCall {
    /// The method's name.
    pub method: Utf8Bytes,
    /// The arguments struct, by field id.
    pub args: StructValue,
}

/// How a handler's call failed.
#[derive(Debug, Clone)]
pub enum Thrown<T> {
    /// One of the method's declared exceptions: the `throws` field's name (`err` in
    /// `throws (1: EchoError err)`) and the exception (JSON text, or a value).
    Declared {
        /// The result struct's field, by name.
        field: String,
        /// The exception.
        exception: T,
    },
    /// Anything else: the caller gets this `TApplicationException`.
    Application(ApplicationException),
}

/// Answers the calls of a [`JsonService`].
pub trait JsonHandler: Send + Sync + 'static {
    /// Handles `call`: the return value as JSON text (ignored for `void` and oneway
    /// methods), or what was thrown (a declared exception as a JSON object).
    fn call(
        &self,
        cx: &mut ServerContext,
        call: JsonCall,
    ) -> impl Future<Output = Result<Bytes, Thrown<Bytes>>> + Send;
}

/// Answers the calls of a [`ValueService`].
pub trait ValueHandler: Send + Sync + 'static {
    /// Handles `call`: the return value (`None` for `void` and oneway methods), or
    /// what was thrown (a declared exception as a struct value).
    fn call(
        &self,
        cx: &mut ServerContext,
        call: ValueCall,
    ) -> impl Future<Output = Result<Option<Value>, Thrown<StructValue>>> + Send;
}

/// The IDL side of a generic service: which service of which descriptor.
#[derive(Debug, Clone)]
struct Served {
    idl: Idl,
    service: String,
}

impl Served {
    fn new(idl: Idl, service: &str) -> Result<Self, GenericError> {
        if idl.current().service(service).is_none() {
            return Err(GenericError::UnknownService(service.to_string()));
        }
        Ok(Served {
            idl,
            service: service.to_string(),
        })
    }

    /// The service's name and oneway methods, read from the descriptor current at
    /// each call.
    fn facts(&self) -> ServiceFacts {
        let (idl, service) = (self.idl.clone(), self.service.clone());
        let name = match idl.current().service(&service) {
            Some(s) => s.name.clone(),
            None => service.clone(),
        };
        ServiceFacts::new(&name, move |method| {
            idl.current()
                .service(&service)
                .and_then(|s| s.method(method))
                .is_some_and(|m| m.oneway)
        })
    }

    /// `method` in `desc` (the descriptor current at the call).
    fn method<'d>(
        &self,
        desc: &'d Descriptor,
        method: &str,
    ) -> Result<&'d MethodDesc, DispatchError> {
        desc.service(&self.service)
            .and_then(|s| s.method(method))
            .ok_or(DispatchError::UnknownMethod)
    }
}

/// A server-side service answering every method of one IDL service through one
/// handler: [`JsonService`] (a [`JsonHandler`]: arguments transcoded straight from the
/// request's protocol into JSON, and the handler's JSON straight into the reply's
/// result struct) or [`ValueService`] (a [`ValueHandler`]: arguments decoded into a
/// [`StructValue`], the handler's value checked against the IDL and written in the
/// request's protocol). Put it in a server with [`facts`](Self::facts):
/// `Server::with_facts(service.clone(), service.facts())`.
///
/// A method the IDL (as it is at the call) does not have is `UNKNOWN_METHOD`;
/// arguments that do not read are `PROTOCOL_ERROR`; a handler's answer that does not
/// fit the method's return type or exceptions is `INTERNAL_ERROR` with the field path,
/// logged.
#[derive(Debug)]
pub struct GenericService<H> {
    served: Served,
    handler: Arc<H>,
}

/// A generic service with a [`JsonHandler`].
pub type JsonService<H> = GenericService<JsonForm<H>>;

/// A generic service with a [`ValueHandler`].
pub type ValueService<H> = GenericService<ValueForm<H>>;

/// A [`JsonHandler`], as a [`GenericService`] holds it.
#[derive(Debug)]
pub struct JsonForm<H>(pub H);

/// A [`ValueHandler`], as a [`GenericService`] holds it.
#[derive(Debug)]
pub struct ValueForm<H>(pub H);

impl<H> Clone for GenericService<H> {
    fn clone(&self) -> Self {
        GenericService {
            served: self.served.clone(),
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<H: JsonHandler> GenericService<JsonForm<H>> {
    /// Serves `service` of `idl` with a JSON `handler`. Fails when the IDL has no such
    /// service now.
    pub fn json(idl: impl Into<Idl>, service: &str, handler: H) -> Result<Self, GenericError> {
        GenericService::with(idl.into(), service, JsonForm(handler))
    }
}

impl<H: ValueHandler> GenericService<ValueForm<H>> {
    /// Serves `service` of `idl` with a value `handler`. Fails when the IDL has no
    /// such service now.
    pub fn values(idl: impl Into<Idl>, service: &str, handler: H) -> Result<Self, GenericError> {
        GenericService::with(idl.into(), service, ValueForm(handler))
    }
}

impl<H> GenericService<H> {
    fn with(idl: Idl, service: &str, handler: H) -> Result<Self, GenericError> {
        Ok(GenericService {
            served: Served::new(idl, service)?,
            handler: Arc::new(handler),
        })
    }

    /// The service's name and oneway methods, for `Server::with_facts` (or
    /// `Multiplex::service_with_facts`); oneway-ness follows the IDL as it reloads.
    pub fn facts(&self) -> ServiceFacts {
        self.served.facts()
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }
}

impl<H: JsonHandler> Service<ServerContext, ServerRequest> for GenericService<JsonForm<H>> {
    type Response = GenericReply;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<GenericReply, DispatchError> {
        let desc = self.served.idl.current();
        let m = self.served.method(&desc, cx.rpc.method.as_str())?;
        let protocol = cx.protocol;
        let args = args_to_json(&desc, m, req.into_args(), protocol)?;
        let call = JsonCall {
            method: cx.rpc.method.clone(),
            args,
        };
        let outcome = self.handler.0.call(cx, call).await;
        let (Some(result), false) = (m.result, m.oneway) else {
            return Ok(GenericReply::unsent());
        };
        let (id, json) = match outcome {
            Ok(_) if m.returns.is_none() => return GenericReply::void(&desc, m, result, protocol),
            Ok(json) => (0, json),
            Err(Thrown::Declared { field, exception }) => (thrown_id(m, &field)?, exception),
            Err(Thrown::Application(e)) => return Err(DispatchError::Application(e)),
        };
        let into = match protocol {
            Protocol::Compact => ThriftProtocol::Compact,
            Protocol::Binary | Protocol::Json => ThriftProtocol::Binary,
        };
        let mut out = Vec::new();
        thrift_dynamic::json_to_result(&desc, result, id, &json, into, &mut out)
            .map_err(|e| handler_misfit(&m.name, e))?;
        match protocol {
            Protocol::Json => {
                // Apache's JSON protocol: through a value, written by its encoder.
                let v = value::decode_struct::<Binary>(&desc, result, out.into())
                    .map_err(|e| handler_misfit(&m.name, e))?;
                let checked =
                    Checked::new(&desc, result, v).map_err(|e| handler_misfit(&m.name, e))?;
                Ok(GenericReply(Reply::Value(checked)))
            }
            _ => Ok(GenericReply(Reply::Encoded(out.into()))),
        }
    }
}

impl<H: ValueHandler> Service<ServerContext, ServerRequest> for GenericService<ValueForm<H>> {
    type Response = GenericReply;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<GenericReply, DispatchError> {
        let desc = self.served.idl.current();
        let m = self.served.method(&desc, cx.rpc.method.as_str())?;
        let protocol = cx.protocol;
        let bytes = req.into_args();
        let args = match protocol {
            Protocol::Binary => value::decode_struct::<Binary>(&desc, m.args, bytes),
            Protocol::Compact => value::decode_struct::<Compact>(&desc, m.args, bytes),
            Protocol::Json => value::decode_struct::<Json>(&desc, m.args, bytes),
        }
        .map_err(|e| unreadable_args(&m.name, e))?;
        let call = ValueCall {
            method: cx.rpc.method.clone(),
            args,
        };
        let outcome = self.handler.0.call(cx, call).await;
        let (Some(result), false) = (m.result, m.oneway) else {
            return Ok(GenericReply::unsent());
        };
        let reply = match outcome {
            Ok(_) if m.returns.is_none() => StructValue::new(),
            Ok(Some(v)) => StructValue::new().with(0, v),
            Ok(None) => {
                return Err(handler_misfit(
                    &m.name,
                    "no return value for a method that returns one",
                ));
            }
            Err(Thrown::Declared { field, exception }) => {
                StructValue::new().with(thrown_id(m, &field)?, Value::Struct(exception))
            }
            Err(Thrown::Application(e)) => return Err(DispatchError::Application(e)),
        };
        let checked = Checked::new(&desc, result, reply).map_err(|e| handler_misfit(&m.name, e))?;
        Ok(GenericReply(Reply::Value(checked)))
    }
}

/// The arguments in `bytes` (in `protocol`) as JSON.
fn args_to_json(
    desc: &Descriptor,
    m: &MethodDesc,
    bytes: Bytes,
    protocol: Protocol,
) -> Result<Bytes, DispatchError> {
    let (bytes, from) = match protocol {
        Protocol::Binary => (bytes, ThriftProtocol::Binary),
        Protocol::Compact => (bytes, ThriftProtocol::Compact),
        Protocol::Json => {
            // Apache's JSON protocol: through a value, then Binary.
            let v = value::decode_struct::<Json>(desc, m.args, bytes)
                .map_err(|e| unreadable_args(&m.name, e))?;
            let b = value::encode_struct::<Binary>(desc, m.args, &v)
                .map_err(|e| unreadable_args(&m.name, e))?;
            (b, ThriftProtocol::Binary)
        }
    };
    let mut json = Vec::with_capacity(bytes.len() + bytes.len() / 2);
    thrift_dynamic::thrift_to_json(desc, m.args, bytes, from, &mut json)
        .map_err(|e| unreadable_args(&m.name, e))?;
    Ok(json.into())
}

/// The id of the `throws` field named `field`.
fn thrown_id(m: &MethodDesc, field: &str) -> Result<i16, DispatchError> {
    match m.throws.iter().find(|t| t.name == field) {
        Some(t) => Ok(t.id),
        None => Err(handler_misfit(
            &m.name,
            format!("{field} is none of the exceptions the method declares"),
        )),
    }
}

#[cold]
fn unreadable_args(method: &str, e: impl std::fmt::Display) -> DispatchError {
    tracing::debug!(method, error = %e, "generic server: arguments that do not read");
    DispatchError::Application(ApplicationException::new(
        ApplicationExceptionKind::ProtocolError,
        format!("decoding the arguments of {method}: {e}"),
    ))
}

#[cold]
fn handler_misfit(method: &str, e: impl std::fmt::Display) -> DispatchError {
    tracing::warn!(method, error = %e, "generic server: the handler's answer does not fit the IDL");
    DispatchError::Application(ApplicationException::new(
        ApplicationExceptionKind::InternalError,
        format!("the reply of {method} does not fit its IDL: {e}"),
    ))
}

/// What a generic service answers: the result struct.
#[derive(Debug)]
pub struct GenericReply(Reply);

#[derive(Debug)]
enum Reply {
    /// Encoded already, in the request's protocol (Binary or Compact).
    Encoded(Bytes),
    /// A checked value, written in whichever protocol the reply goes out in.
    Value(Checked),
}

impl GenericReply {
    /// The reply of a oneway call, which the server never writes.
    fn unsent() -> Self {
        // A stop byte: a well-formed empty result even if an IDL reload between the
        // server's reading and this call's made the method oneway here only.
        GenericReply(Reply::Encoded(Bytes::from_static(&[0])))
    }

    /// A `void` method's success: a result struct with no field set.
    fn void(
        desc: &Descriptor,
        m: &MethodDesc,
        result: StructId,
        protocol: Protocol,
    ) -> Result<Self, DispatchError> {
        Ok(GenericReply(match protocol {
            // The stop byte alone, in both.
            Protocol::Binary | Protocol::Compact => Reply::Encoded(Bytes::from_static(&[0])),
            Protocol::Json => Reply::Value(
                Checked::new(desc, result, StructValue::new())
                    .map_err(|e| handler_misfit(&m.name, e))?,
            ),
        }))
    }
}

impl Body for GenericReply {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        match &self.0 {
            Reply::Encoded(b) => s.encoded_len(b),
            Reply::Value(v) => v.size(s),
        }
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        match &self.0 {
            Reply::Encoded(b) => e.write_encoded(b),
            Reply::Value(v) => v.encode(e),
        }
    }
}
