//! The command lines of the two programs, with the names Apache Thrift's cross-language
//! suite gives its options (`test/README.md`, `test/crossrunner`): `--name=value` (or
//! `--name value`) and bare `--flag`s, parsed by clap.
//!
//! The suite's runner always passes `--port=N`, and adds `--domain-socket=PATH` for
//! the `domain` socket: the Unix socket then wins and the port is not used.
//!
//! [`ServerOptions::read`] and [`ClientOptions::read`] parse and then check what clap
//! cannot see flag by flag (`--ssl` with `--domain-socket`, `--ssl` with no keys);
//! every error names the flag it is about. Names of the suite this crate does not
//! take (the `http` and `zlib` transports, the Python client's `accel` protocols) are
//! refused with a message that says so, rather than as unknown.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;

use clap::builder::{NonEmptyStringValueParser, PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Args, Parser, ValueEnum};

/// The suite's transports this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// Messages back to back on the stream.
    Buffered,
    /// Each message after a 4-byte big-endian length.
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
}

/// The suite's transports this crate does not speak, and what to say.
const OTHER_TRANSPORTS: &[(&str, &str)] = &[
    (
        "http",
        "not supported (this crate speaks buffered and framed)",
    ),
    (
        "zlib",
        "not supported (this crate speaks buffered and framed)",
    ),
    (
        "anonpipe",
        "not supported (this crate speaks buffered and framed)",
    ),
];

/// What the messages are written in, under the (optional) multiplexing.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Thrift Binary.
    Binary,
    /// Thrift Compact.
    Compact,
    /// TJSONProtocol.
    Json,
    /// Apache's THeader, Binary inside.
    Header,
    /// Binary, multiplexed.
    Multi,
    /// Compact, multiplexed.
    Multic,
    /// JSON, multiplexed.
    Multij,
    /// THeader, multiplexed.
    Multih,
}

impl Protocol {
    /// What the messages are written in.
    pub fn encoding(self) -> Encoding {
        match self {
            Protocol::Binary | Protocol::Multi => Encoding::Binary,
            Protocol::Compact | Protocol::Multic => Encoding::Compact,
            Protocol::Json | Protocol::Multij => Encoding::Json,
            Protocol::Header | Protocol::Multih => Encoding::Header,
        }
    }

    /// Whether method names carry the service (`Service:method`) and one connection
    /// reaches both `ThriftTest` and `SecondService`.
    pub fn multiplexed(self) -> bool {
        matches!(
            self,
            Protocol::Multi | Protocol::Multic | Protocol::Multij | Protocol::Multih
        )
    }

    /// The suite's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Binary => "binary",
            Protocol::Compact => "compact",
            Protocol::Json => "json",
            Protocol::Header => "header",
            Protocol::Multi => "multi",
            Protocol::Multic => "multic",
            Protocol::Multij => "multij",
            Protocol::Multih => "multih",
        }
    }
}

/// The suite's protocols this crate does not take by that name, and what to say.
const OTHER_PROTOCOLS: &[(&str, &str)] = &[
    (
        "accel",
        "the Python client's C-accelerated binary: the same bytes are --protocol=binary",
    ),
    (
        "accelc",
        "the Python client's C-accelerated compact: the same bytes are --protocol=compact",
    ),
    (
        "multia",
        "the Python client's C-accelerated multi: the same bytes are --protocol=multi",
    ),
    (
        "multiac",
        "the Python client's C-accelerated multic: the same bytes are --protocol=multic",
    ),
];

/// Parses a [`ValueEnum`], refusing the suite's other names for it with their reason
/// (clap's own parser would call them unknown).
#[derive(Debug, Clone, Copy)]
struct SuiteNames<E> {
    others: &'static [(&'static str, &'static str)],
    of: PhantomData<fn() -> E>,
}

fn suite_names<E>(others: &'static [(&'static str, &'static str)]) -> SuiteNames<E> {
    SuiteNames {
        others,
        of: PhantomData,
    }
}

impl<E: ValueEnum + Clone + Send + Sync + 'static> TypedValueParser for SuiteNames<E> {
    type Value = E;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<E, clap::Error> {
        if let Some((name, why)) = self.others.iter().find(|(name, _)| value == *name) {
            let flag = arg
                .and_then(clap::Arg::get_long)
                .map_or_else(|| "the value".to_string(), |long| format!("--{long}"));
            return Err(cmd
                .clone()
                .error(ErrorKind::InvalidValue, format!("{flag}={name}: {why}")));
        }
        clap::builder::EnumValueParser::<E>::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            E::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
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
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Common {
    /// TCP port to listen on (127.0.0.1; 0 picks a free one) or connect to.
    #[arg(long, value_name = "N", default_value_t = 9090)]
    pub port: u16,

    /// Unix socket to listen on or connect to, instead of the port.
    #[arg(
        long,
        value_name = "PATH",
        value_parser = NonEmptyStringValueParser::new().map(PathBuf::from)
    )]
    pub domain_socket: Option<PathBuf>,

    /// How messages are cut on the stream.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "buffered",
        value_parser = suite_names::<Transport>(OTHER_TRANSPORTS)
    )]
    pub transport: Transport,

    /// What messages are written in, and whether they are multiplexed.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "binary",
        value_parser = suite_names::<Protocol>(OTHER_PROTOCOLS)
    )]
    pub protocol: Protocol,

    /// TLS over TCP, with the keys of --keys-dir.
    #[arg(long)]
    pub ssl: bool,

    /// The suite's keys for --ssl: server.crt, server.key, client.crt, client.key,
    /// CA.pem [default: ../shared/xtest/keys, if there].
    #[arg(long, value_name = "DIR")]
    pub keys_dir: Option<PathBuf>,

    /// Log every call.
    #[arg(short, long)]
    pub verbose: bool,
}

impl Common {
    /// Port or Unix socket: `--domain-socket` wins.
    pub fn socket(&self) -> Socket {
        match &self.domain_socket {
            Some(path) => Socket::Domain(path.clone()),
            None => Socket::Ip(self.port),
        }
    }

    /// The keys, with `--ssl`: `--keys-dir`, else [`Keys::DEFAULT_DIR`].
    pub fn tls(&self) -> Option<Keys> {
        self.ssl.then(|| Keys {
            dir: self
                .keys_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(Keys::DEFAULT_DIR)),
        })
    }

    /// What no single flag shows: TLS over a Unix socket, and TLS without keys.
    fn check(&self, cmd: &mut clap::Command) -> Result<(), clap::Error> {
        if !self.ssl {
            return Ok(());
        }
        if self.domain_socket.is_some() {
            return Err(cmd.error(
                ErrorKind::ArgumentConflict,
                "--ssl with --domain-socket: not supported (the suite runs TLS over TCP only)",
            ));
        }
        if self.keys_dir.is_none() && !std::path::Path::new(Keys::DEFAULT_DIR).is_dir() {
            return Err(cmd.error(
                ErrorKind::MissingRequiredArgument,
                format!(
                    "--ssl needs --keys-dir=DIR (there is no {} from here)",
                    Keys::DEFAULT_DIR
                ),
            ));
        }
        Ok(())
    }
}

/// `thrift-test-server`'s command line.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "thrift-test-server",
    version,
    about = "Apache Thrift's cross-language test server (ThriftTest, and SecondService \
             when multiplexed) on this framework"
)]
pub struct ServerOptions {
    /// The options both programs take.
    #[command(flatten)]
    pub common: Common,

    /// Where to write the bound TCP port once listening (for --port=0).
    #[arg(long, value_name = "PATH")]
    pub port_file: Option<PathBuf>,
}

impl ServerOptions {
    /// Reads a command line (the program's name first), checked.
    pub fn read<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        read_checked(args, |o: &Self| &o.common)
    }
}

/// `thrift-test-client`'s command line.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "thrift-test-client",
    version,
    about = "Apache Thrift's cross-language test client on this framework: runs the \
             suite's checks against a ThriftTest server; exits 0 when all pass"
)]
pub struct ClientOptions {
    /// The options both programs take.
    #[command(flatten)]
    pub common: Common,

    /// The server's host name or address.
    #[arg(
        long,
        value_name = "HOST",
        default_value = "localhost",
        value_parser = NonEmptyStringValueParser::new()
    )]
    pub host: String,

    /// How many times the whole sequence of checks runs.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1)]
    pub testloops: u32,
}

impl ClientOptions {
    /// Reads a command line (the program's name first), checked.
    pub fn read<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        read_checked(args, |o: &Self| &o.common)
    }
}

/// Parses `args` as `P`, then checks its [`Common`] options across flags.
fn read_checked<P, I, T>(args: I, common: impl Fn(&P) -> &Common) -> Result<P, clap::Error>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let opts = P::try_parse_from(args)?;
    common(&opts).check(&mut P::command())?;
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn client(line: &str) -> Result<ClientOptions, clap::Error> {
        ClientOptions::read(std::iter::once("thrift-test-client").chain(line.split_whitespace()))
    }

    fn server(line: &str) -> Result<ServerOptions, clap::Error> {
        ServerOptions::read(std::iter::once("thrift-test-server").chain(line.split_whitespace()))
    }

    #[test]
    fn clap_accepts_both_definitions() {
        ServerOptions::command().debug_assert();
        ClientOptions::command().debug_assert();
    }

    #[test]
    fn the_suite_runner_s_server_command_line_parses() {
        let o =
            server("--protocol=multic --transport=framed --domain-socket=/tmp/t.sock --port=9090")
                .unwrap();
        assert_eq!(o.common.socket(), Socket::Domain("/tmp/t.sock".into()));
        assert_eq!(o.common.transport, Transport::Framed);
        assert_eq!(o.common.protocol, Protocol::Multic);
        assert_eq!(o.common.protocol.encoding(), Encoding::Compact);
        assert!(o.common.protocol.multiplexed());
        assert_eq!(o.common.tls(), None);
        assert_eq!(o.port_file, None);
    }

    #[test]
    fn client_defaults_are_the_suite_s() {
        let o = client("").unwrap();
        assert_eq!(o.host, "localhost");
        assert_eq!(o.testloops, 1);
        assert_eq!(o.common.socket(), Socket::Ip(9090));
        assert_eq!(o.common.transport, Transport::Buffered);
        assert_eq!(o.common.protocol, Protocol::Binary);
        assert!(!o.common.verbose);
    }

    #[test]
    fn values_may_follow_their_name_and_short_forms_work() {
        let o = client("--host 127.0.0.1 -n 3 --port 1234 -v").unwrap();
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.testloops, 3);
        assert_eq!(o.common.socket(), Socket::Ip(1234));
        assert!(o.common.verbose);
    }

    #[test]
    fn every_protocol_is_taken_by_its_suite_name() {
        for p in Protocol::value_variants() {
            let o = client(&format!("--protocol={}", p.name())).unwrap();
            assert_eq!(o.common.protocol, *p);
            assert_eq!(p.multiplexed(), p.name().starts_with("multi"));
        }
        for t in Transport::value_variants() {
            let o = server(&format!("--transport={}", t.name())).unwrap();
            assert_eq!(o.common.transport, *t);
        }
    }

    #[test]
    fn bad_lines_are_refused_naming_the_flag() {
        for (line, says) in [
            ("--protocol=xml", "--protocol"),
            ("--transport=udp", "--transport"),
            ("--port=70000", "--port"),
            ("--port=-1", "--port"),
            ("--testloops=x", "--testloops"),
            ("--frobnicate=1", "--frobnicate"),
            ("--ssl=yes", "--ssl"),
            ("--port=1 --port=2", "--port"),
            ("--host=", "--host"),
            ("--domain-socket=", "--domain-socket"),
            ("stray", "stray"),
            ("--port", "--port"),
            ("--protocol=accel", "--protocol=binary"),
        ] {
            let e = client(line).expect_err(line);
            assert!(e.use_stderr(), "{line}");
            assert!(e.to_string().contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn the_server_takes_no_client_options() {
        let e = server("--host=localhost").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--host"), "{e}");
        let e = client("--port-file=/tmp/p").unwrap_err();
        assert!(e.to_string().contains("--port-file"), "{e}");
    }

    #[test]
    fn suite_names_this_crate_lacks_are_said_to_be_unsupported() {
        for t in ["http", "zlib"] {
            let e = server(&format!("--transport={t}")).unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("--transport={t}: not supported")),
                "{e}"
            );
        }
        let e = server("--ssl --keys-dir=/k --domain-socket=/tmp/s").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ArgumentConflict);
        assert!(
            e.to_string()
                .contains("--ssl with --domain-socket: not supported")
        );
    }

    #[test]
    fn ssl_takes_the_keys_directory() {
        let o = server("--ssl --keys-dir=/keys").unwrap();
        let keys = o.common.tls().unwrap();
        assert_eq!(keys.file("server.crt"), PathBuf::from("/keys/server.crt"));
        // Without --ssl the directory is not used.
        assert_eq!(server("--keys-dir=/keys").unwrap().common.tls(), None);
        // Tests run in the crate's directory, where there is no ../shared/xtest/keys.
        let e = server("--ssl").unwrap_err();
        assert!(e.to_string().contains("--ssl needs --keys-dir=DIR"), "{e}");
    }

    #[test]
    fn help_and_version_are_not_errors_of_the_line() {
        let e = server("--help").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        assert!(!e.use_stderr());
        assert!(e.to_string().contains("--port-file <PATH>"), "{e}");
        let e = client("-h").unwrap_err();
        assert!(e.to_string().contains("--testloops <N>"), "{e}");
        let e = client("--version").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayVersion);
        assert_eq!(
            e.to_string().trim(),
            format!("thrift-test-client {}", env!("CARGO_PKG_VERSION"))
        );
    }
}
