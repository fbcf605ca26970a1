//! The generic client.

use std::sync::Arc;

use bytes::Bytes;
use thrift_codec::{Binary, Compact, Encoder, Json, Sizer, Utf8Bytes};
use thrift_dynamic::value::{self, Checked, StructValue, Value};
use thrift_dynamic::{Descriptor, IdlProvider, MethodDesc};
use volo_core::client::{Client, ClientContext, ClientRequest, ClientResponse, Error, MethodName};
use volo_core::codec::{Body, Encoded, Protocol};
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
        if idl.current().service(service).is_none() {
            return Err(GenericError::UnknownService(service.to_string()));
        }
        Ok(GenericClient {
            client,
            idl,
            service: service.to_string(),
        })
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

    fn method<'d>(
        &self,
        desc: &'d Descriptor,
        method: &str,
    ) -> Result<&'d MethodDesc, GenericError> {
        let service = desc
            .service(&self.service)
            .ok_or_else(|| GenericError::UnknownService(self.service.clone()))?;
        service
            .method(method)
            .ok_or_else(|| GenericError::UnknownMethod {
                service: self.service.clone(),
                method: method.to_string(),
            })
    }
}

/// A call of `m` with `args`: oneway when the IDL says so.
fn request(m: &MethodDesc, args: impl Body + 'static) -> ClientRequest {
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
