//! Connections to one peer, reused one call at a time.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ClientConfig, Error};
use crate::context::Address;
use crate::transport::tls::ClientTls;
use crate::transport::{self, Conn, FrameIo, TransportKind};

/// How to open a connection to one peer.
#[derive(Debug)]
pub(crate) struct Dialer {
    reactor: Option<netpoll_rs::Reactor>,
    /// For an `shm:` peer: the session its connections are streams of.
    shm: transport::ShmDialer,
    transport: TransportKind,
    addr: Address,
    connect_timeout: Duration,
    /// TLS settings, for a TCP peer of a client configured with them.
    tls: Option<ClientTls>,
}

impl Dialer {
    pub(crate) fn new(
        reactor: Option<netpoll_rs::Reactor>,
        addr: Address,
        config: &ClientConfig,
    ) -> Self {
        let tcp = addr.is_tcp();
        Dialer {
            reactor,
            shm: transport::ShmDialer::default(),
            transport: config.transport.kind,
            tls: config.tls.clone().filter(|_| tcp),
            addr,
            connect_timeout: config.timeouts.connect,
        }
    }

    /// The address it dials.
    pub(crate) fn address(&self) -> &Address {
        &self.addr
    }

    /// The netpoll-rs reactor its connections go on, if they go on one (it stops
    /// when its last handle goes, closing them).
    pub(crate) fn reactor(&self) -> Option<&netpoll_rs::Reactor> {
        self.reactor.as_ref()
    }

    /// A new connection, within the connect timeout (resolving a host name and a TLS
    /// handshake included).
    ///
    /// Boxed: connecting is rare (a pool reuses its connections) and its future is
    /// large (a socket connect, a shared-memory handshake, a timer); inline, it would
    /// make every call's future that much larger, at every layer of the client stack.
    /// `timeout`, when given, replaces the client's connect timeout (a governance
    /// rule's).
    pub(crate) async fn connect(&self, timeout: Option<Duration>) -> Result<Conn, Error> {
        Box::pin(transport::connect(
            self.transport,
            &self.addr,
            self.reactor.as_ref(),
            &self.shm,
            timeout.unwrap_or(self.connect_timeout),
            self.tls.as_ref(),
        ))
        .await
        .map_err(|source| Error::connect(self.addr.clone(), source))
    }
}

/// The reactor a client with `config` reads on: one on the current runtime for
/// netpoll-rs, none for tokio's sockets.
pub(crate) fn reactor_for(config: &ClientConfig) -> io::Result<Option<netpoll_rs::Reactor>> {
    Ok(match config.transport.kind {
        TransportKind::Netpoll => Some(netpoll_rs::Reactor::on_runtime(
            &tokio::runtime::Handle::current(),
            config.transport.reactor.clone(),
        )?),
        TransportKind::Tokio => None,
    })
}

/// Idle connections to one peer, and a cap on how many are open.
#[derive(Debug)]
pub(crate) struct Pool {
    dialer: Dialer,
    /// Idle connections with the next sequence id of each (most recent last).
    idle: Mutex<Vec<(Conn, i32)>>,
    /// One permit per connection in use; idle ones came from calls, so open
    /// connections never outnumber the permits.
    slots: Arc<Semaphore>,
}

/// A connection lent to one call. Dropped without [`release`](Self::release) (an
/// error, a timeout, a cancelled call), it is closed, since a reply may still be on
/// its way.
#[derive(Debug)]
pub(crate) struct Pooled {
    pool: Arc<Pool>,
    conn: Conn,
    seq: i32,
    _permit: OwnedSemaphorePermit,
}

impl Pool {
    pub(crate) fn new(
        reactor: Option<netpoll_rs::Reactor>,
        addr: Address,
        config: &ClientConfig,
    ) -> Self {
        Pool {
            dialer: Dialer::new(reactor, addr, config),
            idle: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(config.pool.max_per_instance.max(1))),
        }
    }

    /// An idle connection, or a new one (connected within `connect_timeout`, else
    /// the client's); waits while all are in use.
    pub(crate) async fn get(
        self: &Arc<Self>,
        connect_timeout: Option<Duration>,
    ) -> Result<Pooled, Error> {
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| io::Error::other("the pool is closed"))?;
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match idle {
                Some((conn, seq)) if conn.is_open() && conn.input_len() == 0 => {
                    return Ok(Pooled {
                        pool: Arc::clone(self),
                        conn,
                        seq,
                        _permit: permit,
                    });
                }
                // Closed by the peer while idle (or holding bytes no call asked for).
                Some(_) => continue,
                None => break,
            }
        }
        let conn = self.dialer.connect(connect_timeout).await?;
        Ok(Pooled {
            pool: Arc::clone(self),
            conn,
            seq: 1,
            _permit: permit,
        })
    }
}

impl Drop for Pool {
    /// Lets the idle connections go first, while the dialer's handle keeps the
    /// reactor up: the last handle's drop shuts the reactor down, closing its sockets
    /// at once, and a TLS connection let go after that could no longer send its
    /// close_notify.
    fn drop(&mut self) {
        self.idle
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl Pooled {
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// The sequence id for the next call on this connection.
    pub(crate) fn next_seq(&mut self) -> i32 {
        let s = self.seq;
        self.seq = self.seq.wrapping_add(1);
        s
    }

    /// The call is done and its reply read whole: the connection goes back for reuse.
    pub(crate) fn release(self) {
        let Pooled {
            pool, conn, seq, ..
        } = self;
        pool.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((conn, seq));
    }
}
