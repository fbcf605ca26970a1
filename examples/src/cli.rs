//! What the programs' command lines share beyond clap itself: the error a program's
//! run ends with, and the refusal of flags that parse but do not go together.
//!
//! Each program declares its flags with clap's derive API (`--help`, `--version`,
//! typed values, errors that name the flag); the values they share (framings,
//! addresses, durations...) are parsed by [`crate::options`]. A flag given twice takes
//! its last value (clap's `args_override_self`; a repeatable flag such as
//! `echo-client --meta` adds up instead), as most Unix tools do, so that a script can
//! put its defaults first and a caller's flags after them. A bad command line ends
//! the program with status 2 and clap's message; a run that fails ends it with
//! status 1 and a [`Usage`] message on stderr.

/// Why a program could not do its work (or, for the functions that read settings from
/// elsewhere, such as [`crate::server_only::parse_cpus`], what was wrong with them):
/// the message says what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Ends the program as clap ends it on a bad command line (the message, the usage
/// line, status 2), for flags that each parse but do not go together: `--mux`
/// with a framing that cannot carry it, say.
pub fn refuse<C: clap::CommandFactory>(message: impl std::fmt::Display) -> ! {
    C::command()
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}

/// Ends the program after a failed run: `program: error` on stderr, status 1.
pub fn fail(program: &str, error: Usage) -> ! {
    eprintln!("{program}: {error}");
    std::process::exit(1)
}
