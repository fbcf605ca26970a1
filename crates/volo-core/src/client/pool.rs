//! Connections to one peer, reused one call at a time.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ClientConfig, TransportError};
use crate::context::Address;

/// Idle connections to one peer, and a cap on how many are open.
#[derive(Debug)]
pub(crate) struct Pool {
    reactor: netpoll_rs::Reactor,
    addr: Address,
    connect_timeout: Duration,
    /// Idle connections with the next sequence id of each (most recent last).
    idle: Mutex<Vec<(netpoll_rs::Connection, i32)>>,
    /// One permit per connection in use; idle ones came from calls, so open
    /// connections never outnumber the permits.
    slots: Arc<Semaphore>,
}

/// A connection lent to one call. Dropped without [`release`](Self::release) (an
/// error, a timeout, a cancelled call), it is closed, since a reply may still be on
/// its way.
#[derive(Debug)]
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    conn: netpoll_rs::Connection,
    seq: i32,
    _permit: OwnedSemaphorePermit,
}

impl Pool {
    pub(crate) fn new(reactor: netpoll_rs::Reactor, addr: Address, config: &ClientConfig) -> Self {
        Pool {
            reactor,
            addr,
            connect_timeout: config.connect_timeout,
            idle: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(config.max_connections.max(1))),
        }
    }

    /// An idle connection, or a new one; waits while all are in use.
    pub(crate) async fn get(&self) -> Result<Pooled<'_>, TransportError> {
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
                        pool: self,
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
        let conn = self.connect().await?;
        Ok(Pooled {
            pool: self,
            conn,
            seq: 1,
            _permit: permit,
        })
    }

    async fn connect(&self) -> Result<netpoll_rs::Connection, TransportError> {
        let reactor = self.reactor.clone();
        let addr = self.addr.clone();
        let timeout = self.connect_timeout;
        // The reactor's connects block for up to the timeout: off the runtime's threads.
        let connected = tokio::task::spawn_blocking(move || match &addr {
            Address::Tcp(a) => reactor.connect_tcp(*a, timeout),
            Address::Unix(p) => reactor.connect_unix(p, timeout),
            Address::Shm(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "shm: addresses need the shm-ipc transport, which is not built yet",
            )),
        })
        .await
        .map_err(|e| io::Error::other(format!("the connect task failed: {e}")))?;
        connected.map_err(|source| TransportError::Connect {
            addr: self.addr.clone(),
            source,
        })
    }
}

impl Pooled<'_> {
    pub(crate) fn conn(&self) -> &netpoll_rs::Connection {
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
