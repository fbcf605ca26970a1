//! Helpers of the integration tests: temporary socket paths and the peer process.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A socket path no other test uses.
pub(crate) fn sock_path(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("shm-ipc-{tag}-{}-{n}.sock", std::process::id()))
}

/// The peer process (`src/bin/shm-peer.rs`); killed when dropped, and the socket file
/// it may have bound removed.
pub(crate) struct Peer {
    pub(crate) child: Child,
    path: PathBuf,
}

impl Peer {
    /// Starts `shm-peer ROLE PATH MODE ARGS...` and waits for its `ready`.
    pub(crate) fn start(role: &str, path: &std::path::Path, mode: &str, args: &[&str]) -> Peer {
        let mut peer = Peer::spawn(role, path, mode, args);
        peer.ready();
        peer
    }

    /// Starts it without waiting (a connecting peer is ready once we accept it).
    pub(crate) fn spawn(role: &str, path: &std::path::Path, mode: &str, args: &[&str]) -> Peer {
        let child = Command::new(env!("CARGO_BIN_EXE_shm-peer"))
            .arg(role)
            .arg(path)
            .arg(mode)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn shm-peer");
        Peer {
            child,
            path: path.to_path_buf(),
        }
    }

    /// Waits for its `ready` line.
    pub(crate) fn ready(&mut self) {
        let mut line = String::new();
        BufReader::new(self.child.stdout.take().expect("ready once"))
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "shm-peer did not start");
    }

    /// SIGKILL, and reap it.
    pub(crate) fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `len` bytes that depend on `seed`, so crossed or reordered messages show.
pub(crate) fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The bytes of a received message, copied out.
pub(crate) fn bytes_of(msg: shm_ipc::Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len());
    for c in msg.into_chunks() {
        out.extend_from_slice(&c);
    }
    out
}
