//! The command lines of the two programs, as Apache Thrift's cross-language suite
//! writes them (`test/README.md`, `test/crossrunner`): `--name=value` (or `--name
//! value`) and bare `--flag`s.
//!
//! The suite's runner always passes `--port=N`, and adds `--domain-socket=PATH` for
//! the `domain` socket: the Unix socket then wins and the port is not used.

use std::fmt;
use std::path::PathBuf;

/// The suite's transports this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `buffered`: messages back to back on the stream.
    Buffered,
    /// `framed`: each message after a 4-byte big-endian length.
    Framed,
}

impl Transport {
    /// The suite's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Buffered => "buffered",
            Transport::Framed => "framed",
        }
    }

    fn parse(value: &str) -> Result<Self, Usage> {
        match value {
            "buffered" => Ok(Transport::Buffered),
            "framed" => Ok(Transport::Framed),
            "http" | "zlib" | "anonpipe" => Err(Usage::unsupported(format!(
                "--transport={value} (this crate speaks buffered and framed)"
            ))),
            _ => Err(Usage::bad(format!(
                "unknown --transport={value:?}: expected buffered or framed"
            ))),
        }
    }
}

/// The protocol under the (optional) multiplexing, as the suite names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Thrift Binary (strict).
    Binary,
    /// Thrift Compact.
    Compact,
    /// TJSONProtocol.
    Json,
    /// Apache's THeader (magic `0x0FFF`) around Binary or Compact.
    Header,
}

/// A suite protocol: an [`Encoding`], multiplexed or not (`multi`, `multic`, `multij`,
/// `multih` are TMultiplexedProtocol over binary, compact, json, header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    /// What the messages are written in.
    pub encoding: Encoding,
    /// Whether method names carry the service (`Service:method`) and one connection
    /// reaches both `ThriftTest` and `SecondService`.
    pub multiplexed: bool,
}

impl Protocol {
    /// Every protocol name the programs take, in the suite's order.
    pub const NAMES: [&'static str; 8] = [
        "binary", "compact", "json", "header", "multi", "multic", "multij", "multih",
    ];

    /// The suite's name for it.
    pub fn name(self) -> &'static str {
        match (self.multiplexed, self.encoding) {
            (false, Encoding::Binary) => "binary",
            (false, Encoding::Compact) => "compact",
            (false, Encoding::Json) => "json",
            (false, Encoding::Header) => "header",
            (true, Encoding::Binary) => "multi",
            (true, Encoding::Compact) => "multic",
            (true, Encoding::Json) => "multij",
            (true, Encoding::Header) => "multih",
        }
    }

    fn parse(value: &str) -> Result<Self, Usage> {
        let (encoding, multiplexed) = match value {
            "binary" => (Encoding::Binary, false),
            "compact" => (Encoding::Compact, false),
            "json" => (Encoding::Json, false),
            "header" => (Encoding::Header, false),
            "multi" => (Encoding::Binary, true),
            "multic" => (Encoding::Compact, true),
            "multij" => (Encoding::Json, true),
            "multih" => (Encoding::Header, true),
            "accel" | "accelc" | "multia" | "multiac" => {
                let same = match value {
                    "accel" => "binary",
                    "accelc" => "compact",
                    "multia" => "multi",
                    _ => "multic",
                };
                return Err(Usage::bad(format!(
                    "--protocol={value} is the Python client's C-accelerated variant; \
                     the same bytes are --protocol={same}"
                )));
            }
            _ => {
                return Err(Usage::bad(format!(
                    "unknown --protocol={value:?}: expected one of {}",
                    Self::NAMES.join(", ")
                )));
            }
        };
        Ok(Protocol {
            encoding,
            multiplexed,
        })
    }
}

/// Where the server listens, or the client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Socket {
    /// TCP: the port (the server listens on 127.0.0.1; port 0 picks a free one).
    Ip(u16),
    /// A Unix-domain socket at this path.
    Domain(PathBuf),
}

impl fmt::Display for Socket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Socket::Ip(port) => write!(f, "port {port}"),
            Socket::Domain(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// The TLS files, from `--keys-dir` (laid out like Apache's `test/keys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The directory.
    pub dir: PathBuf,
}

impl Keys {
    /// Where `--keys-dir` is looked for when not given, relative to the working
    /// directory (the repository root, next to which `shared/` lies).
    pub const DEFAULT_DIR: &'static str = "../shared/xtest/keys";

    /// A file of the directory: `server.crt`, `server.key`, `client.crt`, `client.key`,
    /// `CA.pem`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// What both programs take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Common {
    /// Port or Unix socket.
    pub socket: Socket,
    /// `--transport` (default buffered).
    pub transport: Transport,
    /// `--protocol` (default binary).
    pub protocol: Protocol,
    /// `--ssl`: TLS over TCP, with the keys of `--keys-dir`.
    pub tls: Option<Keys>,
    /// `--verbose`: log every call.
    pub verbose: bool,
}

/// `thrift-test-server`'s command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The options both programs take.
    pub common: Common,
    /// `--port-file=PATH`: where to write the bound TCP port once listening (as
    /// Apache's `TestServer.py` does), for `--port=0`.
    pub port_file: Option<PathBuf>,
}

/// `thrift-test-client`'s command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The options both programs take.
    pub common: Common,
    /// `--host` (default `localhost`).
    pub host: String,
    /// `-n`/`--testloops`: how many times the whole sequence of checks runs (default 1).
    pub testloops: u32,
}

/// What the command line asked for instead of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Usage {
    /// `-h`/`--help`.
    Help,
    /// A malformed command line: an unknown option, a bad value.
    Bad(String),
    /// A well-formed request for something this crate does not speak (yet).
    Unsupported(String),
}

impl Usage {
    fn bad(message: String) -> Self {
        Usage::Bad(message)
    }

    fn unsupported(message: String) -> Self {
        Usage::Unsupported(message)
    }
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Usage::Help => f.write_str("help requested"),
            Usage::Bad(m) => f.write_str(m),
            Usage::Unsupported(m) => write!(f, "not supported: {m}"),
        }
    }
}

/// Options that take no value.
const FLAGS: [&str; 3] = ["ssl", "verbose", "help"];

/// The parsed `--name[=value]` pairs, each name once.
#[derive(Debug, Default)]
struct Pairs(Vec<(String, Option<String>)>);

impl Pairs {
    /// Reads `args` (without the program name), accepting only `known` names (and the
    /// common flags).
    fn read(args: impl IntoIterator<Item = String>, known: &[&str]) -> Result<Pairs, Usage> {
        let mut pairs = Pairs::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let name_value = match arg.as_str() {
                "-h" => "help",
                "-n" => "testloops",
                "-v" => "verbose",
                other => other.strip_prefix("--").ok_or_else(|| {
                    Usage::bad(format!(
                        "unexpected argument {other:?}: options are --name=value"
                    ))
                })?,
            };
            let (name, value) = match name_value.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None if FLAGS.contains(&name_value) => (name_value.to_string(), None),
                None => {
                    let v = it
                        .next()
                        .ok_or_else(|| Usage::bad(format!("--{name_value} needs a value")))?;
                    (name_value.to_string(), Some(v))
                }
            };
            if !known.contains(&name.as_str()) && !FLAGS.contains(&name.as_str()) {
                return Err(Usage::bad(format!("unknown option --{name}")));
            }
            if FLAGS.contains(&name.as_str()) && value.is_some() {
                return Err(Usage::bad(format!("--{name} takes no value")));
            }
            if pairs.0.iter().any(|(n, _)| *n == name) {
                return Err(Usage::bad(format!("--{name} given twice")));
            }
            pairs.0.push((name, value));
        }
        if pairs.flag("help") {
            return Err(Usage::Help);
        }
        Ok(pairs)
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, Usage>
    where
        T::Err: fmt::Display,
    {
        match self.value(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|e| Usage::bad(format!("--{name}={v:?}: {e}"))),
        }
    }

    fn common(&self) -> Result<Common, Usage> {
        let port: u16 = self.number("port", 9090)?;
        let socket = match self.value("domain-socket") {
            Some("") => return Err(Usage::bad("--domain-socket needs a path".into())),
            Some(path) => Socket::Domain(PathBuf::from(path)),
            None => Socket::Ip(port),
        };
        let transport = Transport::parse(self.value("transport").unwrap_or("buffered"))?;
        let protocol = Protocol::parse(self.value("protocol").unwrap_or("binary"))?;
        let tls = if self.flag("ssl") {
            if matches!(socket, Socket::Domain(_)) {
                return Err(Usage::unsupported(
                    "--ssl with --domain-socket (the suite runs TLS over TCP only)".into(),
                ));
            }
            let dir = match self.value("keys-dir") {
                Some(dir) => PathBuf::from(dir),
                None if std::path::Path::new(Keys::DEFAULT_DIR).is_dir() => {
                    PathBuf::from(Keys::DEFAULT_DIR)
                }
                None => {
                    return Err(Usage::bad(format!(
                        "--ssl needs --keys-dir=DIR (no {} from here)",
                        Keys::DEFAULT_DIR
                    )));
                }
            };
            Some(Keys { dir })
        } else {
            None
        };
        Ok(Common {
            socket,
            transport,
            protocol,
            tls,
            verbose: self.flag("verbose"),
        })
    }
}

/// The option names both programs take (besides the flags).
const COMMON: [&str; 5] = ["port", "domain-socket", "transport", "protocol", "keys-dir"];

impl ServerOptions {
    /// The usage text.
    pub const USAGE: &'static str = "\
usage: thrift-test-server [--port=N | --domain-socket=PATH] [--transport=buffered|framed]
       [--protocol=binary|compact|json|header|multi|multic|multij|multih]
       [--ssl [--keys-dir=DIR]] [--port-file=PATH] [--verbose]";

    /// Reads the arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, Usage> {
        let mut known = COMMON.to_vec();
        known.push("port-file");
        let pairs = Pairs::read(args, &known)?;
        Ok(ServerOptions {
            common: pairs.common()?,
            port_file: pairs.value("port-file").map(PathBuf::from),
        })
    }
}

impl ClientOptions {
    /// The usage text.
    pub const USAGE: &'static str = "\
usage: thrift-test-client [--host=HOST] [--port=N | --domain-socket=PATH]
       [--transport=buffered|framed]
       [--protocol=binary|compact|json|header|multi|multic|multij|multih]
       [--ssl [--keys-dir=DIR]] [-n N | --testloops=N] [--verbose]";

    /// Reads the arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, Usage> {
        let mut known = COMMON.to_vec();
        known.extend(["host", "testloops"]);
        let pairs = Pairs::read(args, &known)?;
        let host = pairs.value("host").unwrap_or("localhost");
        if host.is_empty() {
            return Err(Usage::bad("--host needs a host name or address".into()));
        }
        Ok(ClientOptions {
            common: pairs.common()?,
            host: host.to_string(),
            testloops: pairs.number("testloops", 1)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_suite_runner_s_server_command_line_parses() {
        let o = ServerOptions::parse(args(
            "--protocol=multic --transport=framed --domain-socket=/tmp/t.sock --port=9090",
        ))
        .unwrap();
        assert_eq!(o.common.socket, Socket::Domain("/tmp/t.sock".into()));
        assert_eq!(o.common.transport, Transport::Framed);
        assert_eq!(
            o.common.protocol,
            Protocol {
                encoding: Encoding::Compact,
                multiplexed: true
            }
        );
        assert_eq!(o.common.tls, None);
        assert_eq!(o.port_file, None);
    }

    #[test]
    fn client_defaults_are_the_suite_s() {
        let o = ClientOptions::parse(args("")).unwrap();
        assert_eq!(o.host, "localhost");
        assert_eq!(o.testloops, 1);
        assert_eq!(o.common.socket, Socket::Ip(9090));
        assert_eq!(o.common.transport, Transport::Buffered);
        assert_eq!(o.common.protocol.name(), "binary");
    }

    #[test]
    fn values_may_follow_their_name_and_short_forms_work() {
        let o = ClientOptions::parse(args("--host 127.0.0.1 -n 3 --port 1234 -v")).unwrap();
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.testloops, 3);
        assert_eq!(o.common.socket, Socket::Ip(1234));
        assert!(o.common.verbose);
    }

    #[test]
    fn every_protocol_name_round_trips() {
        for name in Protocol::NAMES {
            let p = Protocol::parse(name).unwrap();
            assert_eq!(p.name(), name);
            assert_eq!(p.multiplexed, name.starts_with("multi"));
        }
    }

    #[test]
    fn unknown_options_and_values_are_bad_usage() {
        for (line, says) in [
            ("--protocol=xml", "unknown --protocol"),
            ("--transport=udp", "unknown --transport"),
            ("--port=70000", "--port"),
            ("--port=-1", "--port"),
            ("--testloops=x", "--testloops"),
            ("--frobnicate=1", "unknown option --frobnicate"),
            ("--ssl=yes", "takes no value"),
            ("--port=1 --port=2", "given twice"),
            ("--host=", "--host needs"),
            ("--domain-socket=", "needs a path"),
            ("stray", "unexpected argument"),
            ("--port", "needs a value"),
            ("--protocol=accel", "C-accelerated"),
        ] {
            match ClientOptions::parse(args(line)) {
                Err(Usage::Bad(m)) => assert!(m.contains(says), "{line}: {m}"),
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_server_takes_no_client_options() {
        assert!(matches!(
            ServerOptions::parse(args("--host=localhost")),
            Err(Usage::Bad(m)) if m.contains("--host")
        ));
        assert!(matches!(
            ClientOptions::parse(args("--port-file=/tmp/p")),
            Err(Usage::Bad(m)) if m.contains("--port-file")
        ));
    }

    #[test]
    fn suite_transports_this_crate_lacks_are_unsupported_not_bad() {
        for t in ["http", "zlib"] {
            assert!(matches!(
                ServerOptions::parse(args(&format!("--transport={t}"))),
                Err(Usage::Unsupported(_))
            ));
        }
        assert!(matches!(
            ServerOptions::parse(args("--ssl --keys-dir=/k --domain-socket=/tmp/s")),
            Err(Usage::Unsupported(_))
        ));
    }

    #[test]
    fn ssl_takes_the_keys_directory() {
        let o = ServerOptions::parse(args("--ssl --keys-dir=/keys")).unwrap();
        let keys = o.common.tls.unwrap();
        assert_eq!(keys.file("server.crt"), PathBuf::from("/keys/server.crt"));
    }

    #[test]
    fn help_is_not_an_error_of_the_line() {
        assert_eq!(ServerOptions::parse(args("--help")), Err(Usage::Help));
        assert_eq!(ClientOptions::parse(args("-h")), Err(Usage::Help));
    }
}
