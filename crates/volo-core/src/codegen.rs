//! What code generated from IDL names of this crate, in one place: the `thrift-codegen`
//! crate's output refers to `::volo_core::codegen::*` only, so the crate's own
//! modules may move without a generated file changing.
//!
//! Hand-written code should use the items from their homes ([`client`](crate::client),
//! [`server`](crate::server), [`service`](crate::service),
//! [`context`](crate::context), [`codec`](crate::codec)); each is re-exported here
//! unchanged, under the same name.

#[doc(no_inline)]
pub use crate::client::{
    Client, ClientBuilder, ClientContext, ClientError, ClientRequest, ClientResponse, DefaultStack,
    Error, MakeClient,
};
#[doc(no_inline)]
pub use crate::client::{ClientConfig, ClientStream, OpenedStream, StreamClient, StreamRequest};
#[doc(no_inline)]
pub use crate::codec::Body;
#[doc(no_inline)]
pub use crate::context::Address;
#[doc(no_inline)]
pub use crate::context::ServerContext;
#[doc(no_inline)]
pub use crate::server::{DispatchError, ServerError, ServerRequest, ServiceInfo};
#[doc(no_inline)]
pub use crate::server::{ServerStream, StreamContext, StreamHandler};
#[doc(no_inline)]
pub use crate::service::Service;
#[doc(no_inline)]
pub use crate::stream::{HandlerError, Metadata, Receiver, Sender, StreamError};
