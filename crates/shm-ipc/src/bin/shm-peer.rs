//! The other process of shm-ipc's integration tests.
//!
//! `shm-peer serve|connect PATH MODE [key=value...]`: listens on (or connects to) PATH,
//! prints `ready` on stdout once it does, then runs MODE on the session:
//!
//! - `echo`: every stream the other side opens is echoed message by message;
//! - `hold`: messages of every stream are kept, not dropped; an empty message drops all
//!   of them and is answered with an empty message;
//! - `flood`: opens one stream and sends 64 KiB messages as fast as it can, forever.
//!
//! Settings: `region=BYTES`, `classes=SIZE:SHARE,...`, `queue=N`, `spin=MICROS`,
//! `wait=MILLIS` (exhaustion policy Wait instead of Fallback), `inbox=N`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shm_ipc::{Config, Exhaustion, Listener, Message, Session, Stream};

fn config(args: &[String]) -> Config {
    let mut c = Config::default();
    for a in args {
        let (k, v) = a.split_once('=').unwrap_or((a, ""));
        let n = || {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("bad number in {a}"))
        };
        c = match k {
            "region" => c.region_size(n() as usize),
            "queue" => c.queue_capacity(n() as u32),
            "spin" => c.spin(Duration::from_micros(n())),
            "wait" => c.exhaustion(Exhaustion::Wait(Duration::from_millis(n()))),
            "inbox" => c.stream_inbox(n() as usize),
            "classes" => c.size_classes(v.split(',').map(|cls| {
                let (s, w) = cls.split_once(':').expect("SIZE:SHARE");
                (s.parse().expect("size"), w.parse().expect("share"))
            })),
            _ => panic!("unknown setting {a}"),
        };
    }
    c
}

type Held = Arc<Mutex<Vec<Message>>>;

async fn serve_stream(stream: Stream, mode: &str, held: Held) {
    while let Ok(Some(msg)) = stream.recv().await {
        match mode {
            "hold" if msg.is_empty() => {
                held.lock().unwrap().clear();
                if stream.send(&[][..]).await.is_err() {
                    return;
                }
            }
            "hold" => held.lock().unwrap().push(msg),
            _ => {
                if stream.send(msg).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn run(session: Session, mode: String) {
    if mode == "flood" {
        let stream = session.open_stream().expect("open a stream");
        let payload = vec![0x5au8; 64 << 10];
        while stream.send(&payload[..]).await.is_ok() {}
        return;
    }
    let held: Held = Arc::default();
    loop {
        match session.accept_stream().await {
            Ok(Some(stream)) => {
                let (mode, held) = (mode.clone(), held.clone());
                tokio::spawn(async move { serve_stream(stream, &mode, held).await });
            }
            Ok(None) => return,
            Err(e) => {
                eprintln!("shm-peer: the session failed: {e}");
                std::process::exit(1);
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [role, path, mode, rest @ ..] = &args[..] else {
        eprintln!("usage: shm-peer serve|connect PATH echo|hold|flood [key=value...]");
        std::process::exit(2);
    };
    let config = config(rest);
    let session = match role.as_str() {
        "serve" => {
            let listener = Listener::bind(path, config).expect("bind");
            println!("ready");
            std::io::stdout().flush().unwrap();
            listener.accept().await.expect("accept")
        }
        "connect" => {
            let s = Session::connect(path, config).await.expect("connect");
            println!("ready");
            std::io::stdout().flush().unwrap();
            s
        }
        _ => panic!("role must be serve or connect"),
    };
    run(session, mode.clone()).await;
}
