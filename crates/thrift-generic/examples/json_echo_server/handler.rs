//! The handler of `json_echo_server`: echo's semantics on JSON (also run by
//! `tests/interop.rs` against Apache's Python client).

use bytes::Bytes;
use thrift_generic::{JsonCall, JsonHandler, Thrown};
use volo_core::context::ServerContext;

/// Echo's methods on JSON.
pub(crate) struct JsonEcho;

impl JsonHandler for JsonEcho {
    async fn call(&self, _cx: &mut ServerContext, call: JsonCall) -> Result<Bytes, Thrown<Bytes>> {
        let args: serde_json::Value = serde_json::from_slice(&call.args).map_err(|e| {
            Thrown::Application(thrift_wire::ApplicationException::new(
                thrift_wire::ApplicationExceptionKind::InternalError,
                format!("arguments: {e}"),
            ))
        })?;
        let answer = match call.method.as_str() {
            "echo" => &args["req"],
            "echo_test" => &args["t"],
            "echo_ids" => &args["ids"],
            "echo_or_fail" if args["req"]["action"] == "fail" => {
                let e = serde_json::json!({"code": 1, "message": args["req"]["msg"]});
                return Err(Thrown::Declared {
                    field: "err".into(),
                    exception: Bytes::from(e.to_string()),
                });
            }
            "echo_or_fail" => &args["req"],
            // `notify` (oneway) and methods a reloaded IDL added: nothing to say.
            _ => &serde_json::Value::Null,
        };
        Ok(Bytes::from(answer.to_string()))
    }
}
