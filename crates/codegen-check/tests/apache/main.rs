//! Apache Thrift's test IDL corpus (`../shared/apache-idl` beside the repository, or
//! `$APACHE_IDL_DIR` when the crate is built), as codegen-check's build script
//! generated it: the generated types used where Apache's IDLs lean on what its compiler
//! is lenient about, and the cross-language suite's types on the wire.
//!
//! The corpus is Apache's, not the repository's. Without it the build script generates
//! none of it and the one test here says `skipped:`, or fails when `CI` is set: CI must
//! not pass without having compiled the corpus.

#[cfg(apache_idl)]
#[path = "../util/mod.rs"]
mod util;

#[cfg(apache_idl)]
mod lenient;
#[cfg(apache_idl)]
mod thrift_test;

#[cfg(not(apache_idl))]
#[test]
fn apache_s_idl_corpus_was_compiled() {
    let looked_at = env!("APACHE_IDL_LOOKED_AT");
    let missing = format!(
        "Apache Thrift's IDL corpus, not found at {looked_at} when codegen-check was built \
         (put it there or set APACHE_IDL_DIR)"
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("the Apache IDL tests need {missing}; CI is set, so this is a failure");
    }
    eprintln!("skipped: the Apache IDL tests need {missing}");
}
