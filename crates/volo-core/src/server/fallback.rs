//! Calls the generated dispatcher does not know, handed to another service: Kitex's
//! unknown-method handler. One process serves some methods itself and passes the rest
//! on (to a generic handler, or unchanged to another server).

use super::multiplex::EitherReply;
use super::{Dispatch, DispatchError, ServerRequest, ServiceInfo};
use crate::context::ServerContext;
use crate::service::Service;

/// A dispatcher (`known`) with a service for the methods it does not know
/// (`unknown`): a call that `known` answers with [`DispatchError::UnknownMethod`] goes
/// to `unknown` with the same context and arguments (the encoded args struct, in the
/// call's protocol), and `unknown`'s reply is the call's. Made by [`with_fallback`].
///
/// The server learns names and oneway methods from `known` ([`ServiceInfo`]): a
/// method only `unknown` serves is answered unless it came as a ONEWAY message.
///
/// The arguments are kept for `unknown` (a reference count on the frame) until
/// `known` has answered.
#[derive(Debug, Clone)]
pub struct Fallback<D, H> {
    known: D,
    unknown: H,
}

/// `known`, with `unknown` serving the methods it does not know (see [`Fallback`]).
pub fn with_fallback<D, H>(known: D, unknown: H) -> Fallback<D, H> {
    Fallback { known, unknown }
}

impl<D: ServiceInfo, H> ServiceInfo for Fallback<D, H> {
    const NAME: &'static str = D::NAME;

    fn is_oneway(method: &str) -> bool {
        D::is_oneway(method)
    }
}

impl<D, H> Service<ServerContext, ServerRequest> for Fallback<D, H>
where
    D: Dispatch,
    H: Dispatch,
{
    type Response = EitherReply<D::Reply, H::Reply>;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<Self::Response, DispatchError> {
        let again = req.clone();
        match self.known.call(cx, req).await {
            Err(DispatchError::UnknownMethod) => {
                self.unknown.call(cx, again).await.map(EitherReply::Rest)
            }
            other => other.map(EitherReply::This),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use thrift_wire::{ApplicationException, ApplicationExceptionKind};

    use super::*;
    use crate::client::{Client, ClientContext, ErrorKind};
    use crate::codec::Encoded;
    use crate::context::Address;
    use crate::server::Server;
    use crate::test_support::{Text, runtime, text};

    /// Knows `mine` (an echo) and `broken` (an application error).
    struct Known;

    impl ServiceInfo for Known {
        const NAME: &'static str = "Known";

        fn is_oneway(_: &str) -> bool {
            false
        }
    }

    impl Service<ServerContext, ServerRequest> for Known {
        type Response = Text;
        type Error = DispatchError;

        async fn call(
            &self,
            cx: &mut ServerContext,
            req: ServerRequest,
        ) -> Result<Text, DispatchError> {
            match cx.rpc.method.as_str() {
                "mine" => {
                    let args: Text = req.decode(cx)?;
                    Ok(Text { id: 0, ..args })
                }
                "broken" => Err(DispatchError::Application(ApplicationException::new(
                    ApplicationExceptionKind::InternalError,
                    "broken on purpose",
                ))),
                _ => Err(DispatchError::UnknownMethod),
            }
        }
    }

    /// Answers any method with its arguments as they came, and counts its calls.
    #[derive(Clone, Default)]
    struct Relay(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Service<ServerContext, ServerRequest> for Relay {
        type Response = Encoded;
        type Error = DispatchError;

        async fn call(
            &self,
            _cx: &mut ServerContext,
            req: ServerRequest,
        ) -> Result<Encoded, DispatchError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Encoded(req.into_args()))
        }
    }

    /// The dispatcher's own methods are its, errors included; any other goes to the
    /// fallback with its arguments as they came.
    #[test]
    fn unknown_methods_go_to_the_fallback_and_known_ones_do_not() {
        runtime().block_on(async {
            let relay = Relay::default();
            let bound = Server::new(with_fallback(Known, relay.clone()))
                .bind(&"127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let addr: Address = bound.local_addr().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let done = tokio::spawn(bound.serve_with_shutdown(async {
                let _ = stopped.await;
            }));
            let client = Client::builder("Known").address(addr).build().unwrap();
            let calls = async {
                let mine: Text = client
                    .call(&mut ClientContext::new(), "mine", text(1, "a"))
                    .await
                    .unwrap();
                assert_eq!(mine, text(0, "a"));
                let err = client
                    .call::<Text, Text>(&mut ClientContext::new(), "broken", text(1, "b"))
                    .await
                    .unwrap_err();
                assert_eq!(err.kind(), ErrorKind::Application, "{err}");
                assert_eq!(relay.0.load(std::sync::atomic::Ordering::SeqCst), 0);

                // Not the dispatcher's: relayed, the arguments coming back as the result.
                let other: Text = client
                    .call(&mut ClientContext::new(), "other", text(1, "c"))
                    .await
                    .unwrap();
                assert_eq!(other, text(1, "c"));
                assert_eq!(relay.0.load(std::sync::atomic::Ordering::SeqCst), 1);
            };
            tokio::time::timeout(Duration::from_secs(30), calls)
                .await
                .expect("the calls ran out of time");
            let _ = stop.send(());
            tokio::time::timeout(Duration::from_secs(20), done)
                .await
                .expect("the server did not stop")
                .unwrap()
                .unwrap();
        });
    }
}
