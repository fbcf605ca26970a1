//! The values of Kitex's config centers (config-etcd, and the others of
//! kitex-contrib, which share the JSON): what they mean here, and the checks that
//! refuse a bad one.
//!
//! Each category is one JSON value. A client's are keyed by method, with `"*"` for the
//! methods without an entry of their own:
//!
//! | category | per method | here |
//! |---|---|---|
//! | `rpc_timeout` | `{"rpc_timeout_ms": 1000, "conn_timeout_ms": 50}` | [`TimeoutRule`]: the call's limit (0: none) and its connects' (0: the client's) |
//! | `retry` | `{"enable": true, "type": 0, "failure_policy": {...}}` or `"type": 1, "backup_policy": {...}` | [`RetryRule`]: failure retries (`stop_policy.max_retry_times` 0-5, `max_duration_ms`, `disable_chain_stop`; `backoff_policy` `none`, `fixed` with `fix_ms`, `random` with `min_ms`/`max_ms`) or a backup request after `retry_delay_ms`; `"enable": false` turns both off |
//! | `circuit_break` | `{"enable": true, "err_rate": 0.3, "min_sample": 100}` | [`BreakerRule`]; `"*"` sets the service breaker's thresholds, a method gets a breaker of its own |
//!
//! A server's `limit` is one object: `{"connection_limit": 100, "qps_limit": 2000}`
//! (0 or absent: no limit; the rate is per second, as Kitex's `MaxQPS`), and
//! `"concurrency_limit"`, ours, for the calls in progress at once.
//!
//! # What is refused
//!
//! A value is refused as a whole, and the rules in force are kept, when it is not
//! JSON of the shape above, or a number is out of range: a negative count or time, a
//! time over a day, more than 5 retries, a failure rate outside `(0, 1]` for a breaker
//! or `[0, 0.3]` for a retry stop (Kitex's range; 0 is Kitex's default 0.1), a random
//! backoff whose `min_ms` is above its `max_ms`, an unknown backoff type, a retry
//! `type` other than 0 and 1 (Kitex's mixed policy, 2, is not built here), a backup
//! delay of 0. Fields this crate does not know are ignored, as Go's decoder does, so
//! a value a newer Kitex writes still applies.
//!
//! # What is read but not acted on
//!
//! `retry_same_node` (a retry here always prefers another instance), a retry's
//! `cb_policy.error_rate` (checked; the client's retry budget, one per client, is
//! what stops retries when a service fails), `ddl_stop` (a retry here never starts
//! when its wait would pass the call's deadline, which is what `ddl_stop` asks),
//! and a backup's `max_retry_times` above 1 (one backup request is sent at most).

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::rules::{BackoffRule, BreakerRule, LimitRule, MethodRules, RetryRule, TimeoutRule};

/// The longest time a value may give: a day. Longer is taken for a typo (a value in
/// microseconds in a field of milliseconds).
const MAX_MS: i64 = 86_400_000;

/// Most retries a failure policy may ask for, as in Kitex.
const MAX_RETRIES: i64 = 5;

/// Why a value was refused.
#[derive(Debug, thiserror::Error)]
pub enum GovernanceError {
    /// Not JSON, or not of the category's shape.
    #[error("not a valid {category} value: {source}")]
    Json {
        /// The category.
        category: &'static str,
        /// What the decoder said.
        #[source]
        source: serde_json::Error,
    },
    /// A field out of range.
    #[error("{field} = {value} is out of range ({allowed})")]
    OutOfRange {
        /// Where in the value: `method.field`.
        field: String,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// Bytes that are not UTF-8 text (a value is JSON text).
    #[error("not UTF-8 text")]
    NotText,
    /// A value longer than its reader takes (etcd's watch:
    /// `EtcdConfig::max_value_bytes`); not parsed.
    #[error("{bytes} bytes, over the limit of {max}")]
    TooLarge {
        /// The value's length.
        bytes: usize,
        /// The longest taken.
        max: usize,
    },
    /// A setting this crate does not build.
    #[error("{field}: {what} is not supported")]
    Unsupported {
        /// Where in the value.
        field: String,
        /// What was asked for.
        what: String,
    },
}

/// `value` as text for the parsers: at most `max` bytes of UTF-8.
pub fn text(value: &[u8], max: usize) -> Result<&str, GovernanceError> {
    if value.len() > max {
        return Err(GovernanceError::TooLarge {
            bytes: value.len(),
            max,
        });
    }
    std::str::from_utf8(value).map_err(|_| GovernanceError::NotText)
}

fn out_of_range(field: String, value: impl ToString, allowed: &'static str) -> GovernanceError {
    GovernanceError::OutOfRange {
        field,
        value: value.to_string(),
        allowed,
    }
}

/// Decodes a category's value, which must be a JSON object (serde would also take a
/// struct from an array).
fn decode<T: DeserializeOwned>(category: &'static str, value: &str) -> Result<T, GovernanceError> {
    let value: serde_json::Value =
        serde_json::from_str(value).map_err(|source| GovernanceError::Json { category, source })?;
    object(category, value)
}

/// `value`, which must be a JSON object, as a `T`.
fn object<T: DeserializeOwned>(
    category: &'static str,
    value: serde_json::Value,
) -> Result<T, GovernanceError> {
    let json = |source| GovernanceError::Json { category, source };
    if !value.is_object() {
        return Err(json(serde::de::Error::custom("expected a JSON object")));
    }
    serde_json::from_value(value).map_err(json)
}

/// Milliseconds in `0..=MAX_MS` as a duration.
fn millis(field: String, ms: i64) -> Result<Duration, GovernanceError> {
    if !(0..=MAX_MS).contains(&ms) {
        return Err(out_of_range(field, ms, "0 to 86400000 ms"));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// Milliseconds where 0 means "none".
fn optional_millis(field: String, ms: i64) -> Result<Option<Duration>, GovernanceError> {
    millis(field, ms).map(|d| (!d.is_zero()).then_some(d))
}

/// The per-method tables of a client's categories: `"*"` for the rest.
fn per_method<I, T>(
    category: &'static str,
    value: Option<&str>,
    rule: impl Fn(&str, I) -> Result<T, GovernanceError>,
) -> Result<MethodRules<T>, GovernanceError>
where
    I: DeserializeOwned,
{
    let Some(value) = value else {
        return Ok(MethodRules::new());
    };
    let items: HashMap<String, serde_json::Value> = decode(category, value)?;
    let mut rules = MethodRules::new();
    for (method, item) in items {
        // Each method's item an object too (serde would take a struct of defaults
        // from `[]`: a timeout of none).
        let item: I = object(category, item)?;
        if method.is_empty() {
            return Err(out_of_range(
                category.to_string(),
                "\"\"",
                "a method name or \"*\"",
            ));
        }
        let r = rule(&method, item)?;
        rules = if method == "*" {
            rules.any(r)
        } else {
            rules.method(method, r)
        };
    }
    Ok(rules)
}

#[derive(Deserialize)]
struct RpcTimeout {
    #[serde(default)]
    rpc_timeout_ms: i64,
    #[serde(default)]
    conn_timeout_ms: i64,
}

/// The `rpc_timeout` category; `None` gives no rules.
pub fn timeouts(value: Option<&str>) -> Result<MethodRules<TimeoutRule>, GovernanceError> {
    per_method("rpc_timeout", value, |method, t: RpcTimeout| {
        Ok(TimeoutRule {
            rpc: optional_millis(format!("{method}.rpc_timeout_ms"), t.rpc_timeout_ms)?,
            connect: optional_millis(format!("{method}.conn_timeout_ms"), t.conn_timeout_ms)?,
        })
    })
}

#[derive(Deserialize)]
struct RetryItem {
    #[serde(default)]
    enable: bool,
    #[serde(default, rename = "type")]
    kind: i64,
    failure_policy: Option<FailurePolicy>,
    backup_policy: Option<BackupPolicy>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StopPolicy {
    max_retry_times: i64,
    max_duration_ms: i64,
    disable_chain_stop: bool,
    cb_policy: CbPolicy,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CbPolicy {
    error_rate: f64,
}

#[derive(Deserialize)]
struct FailurePolicy {
    #[serde(default)]
    stop_policy: StopPolicy,
    backoff_policy: Option<BackoffPolicy>,
}

#[derive(Deserialize)]
struct BackoffPolicy {
    backoff_type: String,
    #[serde(default)]
    cfg_items: HashMap<String, f64>,
}

#[derive(Deserialize)]
struct BackupPolicy {
    #[serde(default)]
    retry_delay_ms: i64,
    #[serde(default)]
    stop_policy: StopPolicy,
}

/// Checks what a failure and a backup policy's stop policies share.
fn stop_policy(field: &str, stop: &StopPolicy) -> Result<(), GovernanceError> {
    let rate = stop.cb_policy.error_rate;
    if !(0.0..=0.3).contains(&rate) {
        return Err(out_of_range(
            format!("{field}.stop_policy.cb_policy.error_rate"),
            rate,
            "0 to 0.3",
        ));
    }
    millis(
        format!("{field}.stop_policy.max_duration_ms"),
        stop.max_duration_ms,
    )?;
    Ok(())
}

fn backoff(field: &str, policy: &BackoffPolicy) -> Result<BackoffRule, GovernanceError> {
    let item = |name: &str| -> Result<Duration, GovernanceError> {
        let ms = policy.cfg_items.get(name).copied().unwrap_or(0.0);
        let field = format!("{field}.backoff_policy.cfg_items.{name}");
        if !ms.is_finite() || ms.fract() != 0.0 {
            return Err(out_of_range(field, ms, "whole milliseconds"));
        }
        millis(field, ms as i64)
    };
    match policy.backoff_type.as_str() {
        "none" => Ok(BackoffRule::None),
        "fixed" => Ok(BackoffRule::Fixed(item("fix_ms")?)),
        "random" => {
            let (min, max) = (item("min_ms")?, item("max_ms")?);
            if min > max {
                return Err(out_of_range(
                    format!("{field}.backoff_policy.cfg_items.min_ms"),
                    min.as_millis(),
                    "at most max_ms",
                ));
            }
            Ok(BackoffRule::Random { min, max })
        }
        other => Err(GovernanceError::Unsupported {
            field: format!("{field}.backoff_policy.backoff_type"),
            what: format!("{other:?} (none, fixed, random are)"),
        }),
    }
}

fn retry_rule(method: &str, item: RetryItem) -> Result<RetryRule, GovernanceError> {
    if !item.enable {
        return Ok(RetryRule::Off);
    }
    match item.kind {
        0 => {
            let field = format!("{method}.failure_policy");
            let Some(policy) = item.failure_policy else {
                return Err(GovernanceError::Unsupported {
                    field,
                    what: "type 0 without a failure_policy".into(),
                });
            };
            let stop = &policy.stop_policy;
            stop_policy(&field, stop)?;
            if !(0..=MAX_RETRIES).contains(&stop.max_retry_times) {
                return Err(out_of_range(
                    format!("{field}.stop_policy.max_retry_times"),
                    stop.max_retry_times,
                    "0 to 5",
                ));
            }
            let backoff = match &policy.backoff_policy {
                Some(b) => Some(backoff(&field, b)?),
                None => None,
            };
            Ok(RetryRule::Failure {
                max_retries: stop.max_retry_times as u32,
                max_duration: optional_millis(
                    format!("{field}.stop_policy.max_duration_ms"),
                    stop.max_duration_ms,
                )?,
                backoff,
                chain_stop: !stop.disable_chain_stop,
            })
        }
        1 => {
            let field = format!("{method}.backup_policy");
            let Some(policy) = item.backup_policy else {
                return Err(GovernanceError::Unsupported {
                    field,
                    what: "type 1 without a backup_policy".into(),
                });
            };
            stop_policy(&field, &policy.stop_policy)?;
            let delay = millis(format!("{field}.retry_delay_ms"), policy.retry_delay_ms)?;
            if delay.is_zero() {
                return Err(out_of_range(
                    format!("{field}.retry_delay_ms"),
                    0,
                    "above 0",
                ));
            }
            Ok(RetryRule::Backup {
                delay,
                chain_stop: !policy.stop_policy.disable_chain_stop,
            })
        }
        other => Err(GovernanceError::Unsupported {
            field: format!("{method}.type"),
            what: format!("retry type {other} (0, failure, and 1, backup, are)"),
        }),
    }
}

/// The `retry` category; `None` gives no rules.
pub fn retry(value: Option<&str>) -> Result<MethodRules<RetryRule>, GovernanceError> {
    per_method("retry", value, retry_rule)
}

#[derive(Deserialize)]
struct CbItem {
    #[serde(default)]
    enable: bool,
    #[serde(default)]
    err_rate: f64,
    #[serde(default)]
    min_sample: i64,
}

/// The `circuit_break` category; `None` gives no rules.
pub fn breaker(value: Option<&str>) -> Result<MethodRules<BreakerRule>, GovernanceError> {
    per_method("circuit_break", value, |method, c: CbItem| {
        if !c.enable {
            // Off: the thresholds do not matter.
            return Ok(BreakerRule {
                enabled: false,
                error_rate: 1.0,
                min_samples: 1,
            });
        }
        if !(c.err_rate > 0.0 && c.err_rate <= 1.0) {
            return Err(out_of_range(
                format!("{method}.err_rate"),
                c.err_rate,
                "above 0, at most 1",
            ));
        }
        if c.min_sample < 1 {
            return Err(out_of_range(
                format!("{method}.min_sample"),
                c.min_sample,
                "at least 1",
            ));
        }
        Ok(BreakerRule {
            enabled: true,
            error_rate: c.err_rate,
            min_samples: c.min_sample as u64,
        })
    })
}

#[derive(Deserialize)]
struct LimitItem {
    #[serde(default)]
    connection_limit: i64,
    #[serde(default)]
    qps_limit: i64,
    #[serde(default)]
    concurrency_limit: i64,
}

/// The `limit` category of a server; `None` gives no rule (the server's own limits).
pub fn limit(value: Option<&str>) -> Result<Option<LimitRule>, GovernanceError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let item: LimitItem = decode("limit", value)?;
    let count = |field: &str, n: i64| -> Result<Option<usize>, GovernanceError> {
        match usize::try_from(n) {
            Ok(0) => Ok(None),
            Ok(n) if n <= u32::MAX as usize => Ok(Some(n)),
            _ => Err(out_of_range(field.to_string(), n, "0 to 4294967295")),
        }
    };
    Ok(Some(LimitRule {
        connections: count("connection_limit", item.connection_limit)?,
        qps: count("qps_limit", item.qps_limit)?.map(|n| n as u32),
        concurrency: count("concurrency_limit", item.concurrency_limit)?,
    }))
}
