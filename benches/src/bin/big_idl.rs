//! Prints the synthetic IDL of `benches::big_idl` (argument: the struct count, 550 by
//! default, which makes about 10,000 lines).
//!
//! `cargo run -p benches --bin big-idl -- 550 > big.thrift`

fn main() {
    let structs = match std::env::args().nth(1) {
        None => 550,
        Some(arg) => match arg.parse() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("usage: big-idl [STRUCT_COUNT]");
                std::process::exit(2);
            }
        },
    };
    print!("{}", benches::big_idl(structs));
}
