//! A connection's timeouts, call cap and drain, on the connection core with a fake
//! clock: exact to the millisecond, and without a sleep.

use super::*;

fn echo(seq: i32, t: &str) -> Vec<u8> {
    framed(&call::<Binary>(MessageType::Call, "echo", seq, t))
}

fn timeouts(read: u64, idle: Option<u64>) -> ServerConfig {
    ServerConfig {
        timeouts: ServerTimeouts {
            read: Duration::from_millis(read),
            idle: idle.map(Duration::from_millis),
            ..Default::default()
        },
        ..ServerConfig::default()
    }
}

const MS: Duration = Duration::from_millis(1);

/// A frame that has begun must be whole within the read timeout, counted from its
/// first byte (later parts do not restart it); a connection with nothing begun is
/// not bound by it.
#[test]
fn a_begun_frame_must_arrive_within_the_read_timeout_of_its_first_byte() {
    on_harness(timeouts(200, None), |mut c, _| {
        assert_eq!(c.deadline(), None, "idle, no idle timeout: no deadline");
        c.advance(Duration::from_secs(3600));
        assert_eq!(c.closed, None);

        let msg = echo(1, "x");
        c.write_all(&msg[..5]).unwrap();
        assert_eq!(c.deadline(), Some(200 * MS));
        c.advance(100 * MS);
        c.write_all(&msg[5..10]).unwrap();
        assert_eq!(c.deadline(), Some(100 * MS), "still from the first byte");
        c.advance(99 * MS);
        assert_eq!(c.closed, None);
        c.advance(MS);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Read)));
        assert!(read_until_closed(&mut c).is_empty());
    });
}

/// A frame that arrives whole in time is answered, and the read timeout is lifted.
#[test]
fn a_frame_completed_in_time_is_answered_and_lifts_the_read_timeout() {
    on_harness(timeouts(200, None), |mut c, _| {
        let msg = echo(1, "in time");
        c.write_all(&msg[..msg.len() - 1]).unwrap();
        c.advance(199 * MS);
        c.write_all(&msg[msg.len() - 1..]).unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut c)).1,
            Answer::Ok("in time".into())
        );
        assert_eq!(c.deadline(), None);
        c.advance(Duration::from_secs(60));
        assert_eq!(c.closed, None);
    });
}

/// The idle timeout counts from the last frame or reply, never while a call is in
/// progress, and closes a connection that has nothing to do.
#[test]
fn the_idle_timeout_spares_a_call_in_progress_and_counts_from_its_reply() {
    on_harness(timeouts(50, Some(150)), |mut c, s| {
        assert_eq!(c.deadline(), Some(150 * MS), "from the accept");
        c.advance(100 * MS);
        c.write_all(&framed(&call::<Binary>(
            MessageType::Call,
            "wait",
            1,
            "late",
        )))
        .unwrap();
        assert_eq!(c.deadline(), None, "a call is in progress");
        c.advance(Duration::from_secs(600));
        assert_eq!(c.closed, None);
        s.gate.add_permits(1);
        c.poll_calls();
        assert_eq!(
            answer::<Binary>(read_framed(&mut c)).1,
            Answer::Ok("late".into())
        );
        assert_eq!(c.deadline(), Some(150 * MS), "from the reply");
        c.advance(149 * MS);
        c.write_all(&echo(2, "again")).unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut c)).1,
            Answer::Ok("again".into())
        );
        c.advance(149 * MS);
        assert_eq!(c.closed, None);
        c.advance(MS);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Idle)));
    });
}

/// TTHeader calls run up to `max_inflight_per_connection` at once; the next frame is
/// taken when one of them is answered.
#[test]
fn ttheader_calls_run_up_to_the_per_connection_cap() {
    let config = ServerConfig {
        capacity: ServerCapacity {
            max_inflight_per_connection: 2,
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    on_harness(config, |mut c, s| {
        let mut bytes = Vec::new();
        for seq in 1..=3 {
            bytes.extend(ttheader(
                seq,
                &call::<Binary>(MessageType::Call, "wait", seq, &format!("w{seq}")),
            ));
        }
        c.write_all(&bytes).unwrap();
        assert_eq!((c.in_progress(), s.gauge.now()), (2, 2));
        assert!(c.buffered() > 0, "the third frame waits");
        s.gate.add_permits(1);
        c.poll_calls();
        assert_eq!(read_ttheader(&mut c), (1, Answer::Ok("w1".into())));
        assert_eq!(c.in_progress(), 2, "the third call started");
        assert_eq!(c.buffered(), 0);
        s.gate.add_permits(2);
        c.poll_calls();
        let mut rest = [read_ttheader(&mut c).0, read_ttheader(&mut c).0];
        rest.sort();
        assert_eq!(rest, [2, 3]);
    });
}

/// A shutdown leaves an idle connection open for the linger, answering what comes
/// with the closing refusal, unrun, and closes it once the linger passed after the
/// last answer.
#[test]
fn a_shutdown_refuses_what_comes_in_the_linger_then_closes() {
    on_harness(ServerConfig::default(), |mut c, _| {
        c.shutdown();
        assert_eq!(c.closed, None);
        assert_eq!(c.deadline(), Some(DRAIN_LINGER));
        c.advance(DRAIN_LINGER / 2);
        c.write_all(&echo(1, "late")).unwrap();
        let (h, a) = answer::<Binary>(read_framed(&mut c));
        assert_eq!(h.seq_id, 1);
        let Answer::Exception(kind, message) = a else {
            panic!("ran: {a:?}");
        };
        assert_eq!(kind, ApplicationExceptionKind::InternalError);
        assert!(
            message.starts_with(crate::refusal::CLOSING_PREFIX),
            "{message}"
        );
        // The linger starts again from that answer.
        assert_eq!(c.deadline(), Some(DRAIN_LINGER));
        c.advance(DRAIN_LINGER - MS);
        assert_eq!(c.closed, None);
        c.advance(MS);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Drained)));
    });
}

/// After a shutdown starts, the call in progress runs and is answered; a frame that
/// arrives after it (whole or begun) is refused unrun, a oneway one runs; the
/// connection closes the linger after the last answer.
#[test]
fn a_shutdown_answers_the_call_in_hand_and_refuses_the_next() {
    on_harness(ServerConfig::default(), |mut c, s| {
        let mut bytes = framed(&call::<Binary>(MessageType::Call, "wait", 1, "in hand"));
        let next = echo(2, "begun");
        bytes.extend_from_slice(&next[..6]);
        c.write_all(&bytes).unwrap();
        c.shutdown();
        assert_eq!(c.closed, None, "a call is in progress");
        assert_eq!(c.deadline(), None, "no linger while a call is in hand");
        s.gate.add_permits(1);
        c.poll_calls();
        c.write_all(&next[6..]).unwrap();
        let notified = s.notified.load(std::sync::atomic::Ordering::SeqCst);
        c.write_all(&framed(&call::<Binary>(
            MessageType::Oneway,
            "notify",
            3,
            "n",
        )))
        .unwrap();
        c.poll_calls();
        assert_eq!(
            s.notified.load(std::sync::atomic::Ordering::SeqCst),
            notified + 1,
            "a oneway call still runs"
        );
        let (h, a) = answer::<Binary>(read_framed(&mut c));
        assert_eq!((h.seq_id, a), (1, Answer::Ok("in hand".into())));
        let (h, a) = answer::<Binary>(read_framed(&mut c));
        assert_eq!(h.seq_id, 2);
        assert!(
            matches!(&a, Answer::Exception(_, m) if crate::refusal::is_closing(
                &ApplicationException::new(ApplicationExceptionKind::InternalError, m.clone())
            )),
            "{a:?}"
        );
        c.advance(DRAIN_LINGER);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Drained)));
        assert!(read_until_closed(&mut c).is_empty());
    });
}

/// A TTHeader frame as read: its header and its message.
fn read_tt_frame(c: &mut impl Read) -> (Header, Vec<u8>) {
    let reply = Bytes::from(framed(&read_framed(c)));
    let (h, payload) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
    (h, payload.to_vec())
}

/// On a TTHeader connection that carried calls at once (a mux client), a
/// shutdown answers every call in progress, each reply marked `crrst`; then, with no
/// call in hand, it sends Kitex's control frame (sequence id 0, `crrst`, a `none`
/// reply), lingers and closes.
#[test]
fn a_shutdown_tells_a_mux_connection_and_answers_its_calls() {
    on_harness(ServerConfig::default(), |mut c, s| {
        let mut bytes = Vec::new();
        for seq in 1..=3 {
            bytes.extend(ttheader(
                seq,
                &call::<Binary>(MessageType::Call, "wait", seq, "m"),
            ));
        }
        c.write_all(&bytes).unwrap();
        c.shutdown();
        assert!(
            c.take_output().is_empty(),
            "nothing while calls are in hand"
        );
        for left in [2, 1, 0] {
            s.gate.add_permits(1);
            c.poll_calls();
            assert_eq!(c.in_progress(), left);
            assert_eq!(c.closed, None);
        }
        let mut seqs = Vec::new();
        for _ in 0..3 {
            let (h, msg) = read_tt_frame(&mut c);
            assert_eq!(h.str_value("crrst"), Some("1"));
            assert_eq!(answer::<Binary>(msg).1, Answer::Ok("m".into()));
            seqs.push(h.seq_id);
        }
        seqs.sort();
        assert_eq!(seqs, [1, 2, 3]);
        let (h, msg) = read_tt_frame(&mut c);
        assert_eq!(h.seq_id, 0);
        assert_eq!(h.str_value("crrst"), Some("1"));
        let mh = Codec::<Binary>::new()
            .decoder(Bytes::from(msg))
            .unwrap()
            .read_message_begin()
            .unwrap();
        assert_eq!(
            (mh.name.as_str(), mh.ty, mh.seq_id),
            ("none", MessageType::Reply, 0)
        );
        c.advance(DRAIN_LINGER);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Drained)));
    });
}

/// A connection that never carried two calls at once gets no control frame: a client
/// that does not mux its connection would take it for the reply to its next call.
#[test]
fn a_shutdown_sends_no_control_frame_to_a_one_call_connection() {
    on_harness(ServerConfig::default(), |mut c, _| {
        c.write_all(&ttheader(
            1,
            &call::<Binary>(MessageType::Call, "echo", 1, "a"),
        ))
        .unwrap();
        let (h, _) = read_tt_frame(&mut c);
        assert_eq!((h.seq_id, h.str_value("crrst")), (1, None));
        c.shutdown();
        c.advance(DRAIN_LINGER);
        assert_eq!(c.closed, Some(Closed::Timeout(Expired::Drained)));
        assert!(read_until_closed(&mut c).is_empty());
    });
}

/// A caller's TTHeader timeout becomes the call's deadline, counted from when the
/// frame was taken (the core's `now`), not from a clock of its own.
#[test]
fn a_callers_timeout_counts_from_when_the_frame_was_taken() {
    let seen = Arc::new(std::sync::Mutex::new(None));
    let layer = {
        let seen = Arc::clone(&seen);
        crate::service::layer_fn(move |inner| Record {
            inner,
            seen: Arc::clone(&seen),
        })
    };
    let service = TestService::default();
    let shared = Arc::new(
        Server::new(service)
            .layer(layer)
            .config(ServerConfig::default())
            .into_shared(),
    );
    let mut c = Harness::new(shared);
    c.advance(Duration::from_secs(5));
    let taken = c.now;
    let msg = call::<Binary>(MessageType::Call, "echo", 1, "d");
    c.write_all(&ttheader_with_timeout(1, &msg, Duration::from_millis(700)))
        .unwrap();
    let deadline = seen.lock().unwrap().expect("the layer saw the call");
    assert_eq!(deadline, taken + Duration::from_millis(700));
}

/// Records the deadline of the call it passes on.
struct Record<S> {
    inner: S,
    seen: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl<S> crate::service::Service<ServerContext, crate::server::ServerRequest> for Record<S>
where
    S: crate::service::Service<ServerContext, crate::server::ServerRequest, Error = DispatchError>
        + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: crate::server::ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        *self.seen.lock().unwrap() = cx.rpc.deadline;
        self.inner.call(cx, req).await
    }
}
