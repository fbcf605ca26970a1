use std::time::Duration;

use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn kitex_timeouts_parse_per_method_with_a_default() {
    let rules = kitex::timeouts(Some(
        r#"{"*": {"conn_timeout_ms": 100, "rpc_timeout_ms": 3000},
            "echo": {"conn_timeout_ms": 50, "rpc_timeout_ms": 1000, "later_field": 1}}"#,
    ))
    .unwrap();
    let echo = rules.get("echo").unwrap();
    assert_eq!((echo.rpc, echo.connect), (Some(1000 * MS), Some(50 * MS)));
    let other = rules.get("other").unwrap();
    assert_eq!(
        (other.rpc, other.connect),
        (Some(3000 * MS), Some(100 * MS))
    );
    let zero = kitex::timeouts(Some(r#"{"*": {"rpc_timeout_ms": 0}}"#)).unwrap();
    assert_eq!(
        zero.get("x").unwrap().rpc,
        None,
        "0 is no limit, as in Kitex"
    );
    assert!(kitex::timeouts(None).unwrap().is_empty());
}

#[test]
fn kitex_retry_parses_failure_and_backup_policies() {
    let rules = kitex::retry(Some(
        r#"{
        "*": {"enable": true, "type": 0, "failure_policy": {
            "stop_policy": {"max_retry_times": 3, "max_duration_ms": 2000,
                            "cb_policy": {"error_rate": 0.3}},
            "backoff_policy": {"backoff_type": "fixed", "cfg_items": {"fix_ms": 50}},
            "retry_same_node": false}},
        "echo": {"enable": true, "type": 1, "backup_policy": {
            "retry_delay_ms": 100, "retry_same_node": false,
            "stop_policy": {"max_retry_times": 2, "max_duration_ms": 300,
                            "disable_chain_stop": true, "cb_policy": {"error_rate": 0.2}}}},
        "off": {"enable": false}}"#,
    ))
    .unwrap();
    assert_eq!(
        rules.get("any"),
        Some(&RetryRule::Failure {
            max_retries: 3,
            max_duration: Some(2000 * MS),
            backoff: Some(BackoffRule::Fixed(50 * MS)),
            chain_stop: true,
        })
    );
    assert_eq!(
        rules.get("echo"),
        Some(&RetryRule::Backup {
            delay: 100 * MS,
            chain_stop: false,
        })
    );
    assert_eq!(rules.get("off"), Some(&RetryRule::Off));
    let random = kitex::retry(Some(
        r#"{"*": {"enable": true, "failure_policy": {"stop_policy": {"max_retry_times": 1},
              "backoff_policy": {"backoff_type": "random", "cfg_items": {"min_ms": 5, "max_ms": 9}}}}}"#,
    ))
    .unwrap();
    assert_eq!(
        random.get("x"),
        Some(&RetryRule::Failure {
            max_retries: 1,
            max_duration: None,
            backoff: Some(BackoffRule::Random {
                min: 5 * MS,
                max: 9 * MS
            }),
            chain_stop: true,
        })
    );
}

#[test]
fn kitex_breaker_and_limit_parse() {
    let rules = kitex::breaker(Some(
        r#"{"echo": {"enable": true, "err_rate": 0.3, "min_sample": 100},
            "*": {"enable": false}}"#,
    ))
    .unwrap();
    let echo = rules.get("echo").unwrap();
    assert!(echo.enabled && echo.error_rate == 0.3 && echo.min_samples == 100);
    assert!(!rules.get("other").unwrap().enabled);
    let limit = kitex::limit(Some(r#"{"connection_limit": 100, "qps_limit": 2000}"#)).unwrap();
    assert_eq!(
        limit,
        Some(LimitRule {
            connections: Some(100),
            qps: Some(2000),
            concurrency: None,
        })
    );
    assert_eq!(
        kitex::limit(Some(r#"{"qps_limit": 0, "concurrency_limit": 8}"#)).unwrap(),
        Some(LimitRule {
            connections: None,
            qps: None,
            concurrency: Some(8),
        }),
        "0 is no limit"
    );
    assert_eq!(kitex::limit(None).unwrap(), None);
}

/// Each of these is refused with the field it is about named.
#[test]
fn bad_values_are_refused_with_the_field_named() {
    let cases: [(&str, Result<(), GovernanceError>, &str); 15] = [
        ("json", kitex::timeouts(Some("{")).map(drop), "not a valid rpc_timeout"),
        (
            "shape",
            kitex::timeouts(Some(r#"{"*": 5}"#)).map(drop),
            "not a valid rpc_timeout",
        ),
        (
            "an array for a method",
            kitex::timeouts(Some(r#"{"*": []}"#)).map(drop),
            "expected a JSON object",
        ),
        (
            "negative",
            kitex::timeouts(Some(r#"{"echo": {"rpc_timeout_ms": -1}}"#)).map(drop),
            "echo.rpc_timeout_ms = -1",
        ),
        (
            "a week",
            kitex::timeouts(Some(r#"{"*": {"conn_timeout_ms": 604800000}}"#)).map(drop),
            "*.conn_timeout_ms",
        ),
        (
            "retries",
            kitex::retry(Some(
                r#"{"*": {"enable": true, "failure_policy": {"stop_policy": {"max_retry_times": 6}}}}"#,
            ))
            .map(drop),
            "max_retry_times = 6",
        ),
        (
            "rate",
            kitex::retry(Some(
                r#"{"*": {"enable": true, "failure_policy": {"stop_policy": {"cb_policy": {"error_rate": 0.5}}}}}"#,
            ))
            .map(drop),
            "error_rate = 0.5",
        ),
        (
            "backoff",
            kitex::retry(Some(
                r#"{"*": {"enable": true, "failure_policy": {"backoff_policy": {"backoff_type": "exp"}}}}"#,
            ))
            .map(drop),
            "backoff_type",
        ),
        (
            "random",
            kitex::retry(Some(
                r#"{"*": {"enable": true, "failure_policy": {"backoff_policy": {"backoff_type": "random", "cfg_items": {"min_ms": 9, "max_ms": 5}}}}}"#,
            ))
            .map(drop),
            "min_ms = 9",
        ),
        (
            "mixed",
            kitex::retry(Some(r#"{"*": {"enable": true, "type": 2}}"#)).map(drop),
            "retry type 2",
        ),
        (
            "backup delay",
            kitex::retry(Some(
                r#"{"*": {"enable": true, "type": 1, "backup_policy": {"retry_delay_ms": 0}}}"#,
            ))
            .map(drop),
            "retry_delay_ms = 0",
        ),
        (
            "err rate",
            kitex::breaker(Some(r#"{"echo": {"enable": true, "err_rate": 1.5, "min_sample": 1}}"#))
                .map(drop),
            "echo.err_rate = 1.5",
        ),
        (
            "min sample",
            kitex::breaker(Some(r#"{"echo": {"enable": true, "err_rate": 0.5}}"#)).map(drop),
            "echo.min_sample = 0",
        ),
        (
            "limit",
            kitex::limit(Some(r#"{"qps_limit": -5}"#)).map(drop),
            "qps_limit = -5",
        ),
        (
            "method",
            kitex::breaker(Some(r#"{"": {"enable": false}}"#)).map(drop),
            "a method name",
        ),
    ];
    for (name, result, says) in cases {
        let err = result.expect_err(name).to_string();
        assert!(err.contains(says), "{name}: {err:?} lacks {says:?}");
    }
}

#[test]
fn a_refused_value_keeps_the_rules_in_force() {
    let gov = ClientGovernance::new("echo");
    let good = r#"{"*": {"rpc_timeout_ms": 300}}"#;
    gov.apply_kitex(ClientCategory::Timeout, Some(good))
        .unwrap();
    let version = gov.version();
    let bad = r#"{"*": {"rpc_timeout_ms": "soon"}}"#;
    assert!(gov.apply_kitex(ClientCategory::Timeout, Some(bad)).is_err());
    assert_eq!(gov.version(), version, "nothing changed");
    let rule = *gov.rules().timeouts.get("x").unwrap();
    assert_eq!(rule.rpc, Some(300 * MS));
    assert_eq!(gov.updates(ClientCategory::Timeout), (1, 1));
    // Removed: back to no rules.
    gov.apply_kitex(ClientCategory::Timeout, None).unwrap();
    assert!(gov.rules().timeouts.is_empty());

    let server = ServerGovernance::new("echo");
    server
        .apply_kitex(Some(r#"{"connection_limit": 3}"#))
        .unwrap();
    assert!(server.apply_kitex(Some("[]")).is_err());
    assert_eq!(server.limit().unwrap().connections, Some(3));
    server.apply_kitex(None).unwrap();
    assert_eq!(server.limit(), None);
    assert_eq!(server.updates(), (2, 1));
}

#[test]
fn bytes_too_long_or_not_text_are_refused_and_counted() {
    let gov = ClientGovernance::new("echo");
    let good = br#"{"*": {"rpc_timeout_ms": 300}}"#;
    gov.apply_kitex_bytes(ClientCategory::Timeout, Some(good), 64)
        .unwrap();
    let e = gov
        .apply_kitex_bytes(ClientCategory::Timeout, Some(&[b'{', 0xff]), 64)
        .unwrap_err();
    assert!(matches!(e, GovernanceError::NotText), "{e}");
    let e = gov
        .apply_kitex_bytes(ClientCategory::Timeout, Some(good), 10)
        .unwrap_err();
    assert!(
        matches!(e, GovernanceError::TooLarge { bytes: 30, max: 10 }),
        "{e}"
    );
    assert_eq!(gov.updates(ClientCategory::Timeout), (1, 2));
    assert_eq!(gov.rules().timeouts.get("x").unwrap().rpc, Some(300 * MS));

    let server = ServerGovernance::new("echo");
    assert!(server.apply_kitex_bytes(Some(&[0xc0]), 64).is_err());
    server.apply_kitex_bytes(None, 64).unwrap();
    assert_eq!(server.updates(), (1, 1));
}

/// Two categories set at once from two threads: each keeps its own last value (a
/// setter copies the others as they are when it swaps, not as they were when it read).
#[test]
fn setters_of_two_categories_at_once_lose_neither() {
    let gov = ClientGovernance::new("echo");
    let timeouts = |ms: u32| {
        MethodRules::new().any(TimeoutRule {
            rpc: Some(ms * MS),
            connect: None,
        })
    };
    let retry = |n: u32| {
        MethodRules::new().any(RetryRule::Failure {
            max_retries: n % 6,
            max_duration: None,
            backoff: None,
            chain_stop: true,
        })
    };
    std::thread::scope(|s| {
        s.spawn(|| (1..=2000).for_each(|i| gov.set_timeouts(timeouts(i))));
        s.spawn(|| (1..=2000).for_each(|i| gov.set_retry(retry(i))));
    });
    let rules = gov.rules();
    assert_eq!(rules.timeouts, timeouts(2000));
    assert_eq!(rules.retry, retry(2000));
    assert_eq!(gov.version(), 4000);
}
