//! Field paths over encoded messages: parsing, resolution against the `Mixed`
//! descriptor, reading and replacing against thrift-wire's fixtures in both
//! protocols, and hostile inputs.

mod hostile;
mod parse;
mod read;
mod replace;
mod util;
