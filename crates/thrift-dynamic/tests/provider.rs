//! The provider swaps in a new descriptor when the files change, keeps the last good
//! one when the change does not load, and follows includes it learns of.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use thrift_dynamic::IdlProvider;

/// A fresh directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("thrift-dynamic-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn methods(p: &IdlProvider) -> Vec<String> {
    p.current().services()[0]
        .methods
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

#[test]
fn a_change_that_loads_replaces_one_that_fails_is_refused_and_calls_keep_theirs() {
    let dir = scratch("reload");
    let idl = dir.join("svc.thrift");
    write(&idl, "service S { void a() }\n");
    let p = IdlProvider::new(&[&idl], &[] as &[&Path]).unwrap();
    assert_eq!(methods(&p), ["a"]);
    assert!(!p.reload().unwrap(), "nothing changed");

    // A call holds the descriptor it took.
    let taken = p.current();
    write(&idl, "service S { void a(), void b() }\n");
    assert!(p.reload().unwrap());
    assert_eq!(methods(&p), ["a", "b"]);
    assert_eq!(
        taken.services()[0].methods.len(),
        1,
        "the call's own is whole"
    );
    assert!(!p.reload().unwrap());

    // A broken change: an error once, then quiet until the next change.
    write(&idl, "service S { void a(), void b(), Nope c() }\n");
    let err = p.reload().unwrap_err();
    assert!(err.to_string().contains("Nope"), "{err}");
    assert_eq!(methods(&p), ["a", "b"], "the last good one stays");
    assert!(!p.reload().unwrap(), "the failed change is not read again");

    write(&idl, "service S { void a(), void b(), void c() }\n");
    assert!(p.reload().unwrap());
    assert_eq!(methods(&p), ["a", "b", "c"]);

    // A root that goes away is an error; the descriptor stays.
    std::fs::remove_file(&idl).unwrap();
    assert!(p.reload().is_err());
    assert_eq!(methods(&p), ["a", "b", "c"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn includes_are_watched_those_added_by_a_change_too() {
    let dir = scratch("includes");
    let idl = dir.join("svc.thrift");
    let inc = dir.join("inc");
    std::fs::create_dir_all(&inc).unwrap();
    write(&inc.join("a.thrift"), "struct A { 1: i32 x }\n");
    write(&inc.join("b.thrift"), "struct B { 1: i32 y }\n");
    write(&idl, "include \"a.thrift\"\nservice S { a.A get() }\n");
    let p = IdlProvider::new(&[&idl], &[&inc]).unwrap();
    assert_eq!(p.current().paths().len(), 2);

    // A change in the include alone is seen.
    write(&inc.join("a.thrift"), "struct A { 1: i32 x, 2: i32 z }\n");
    assert!(p.reload().unwrap());
    let a = p.current().struct_named("A").unwrap();
    assert_eq!(p.current().struct_desc(a).fields.len(), 2);

    // The root includes another file, whose changes are then seen too.
    write(
        &idl,
        "include \"a.thrift\"\ninclude \"b.thrift\"\nservice S { a.A get(), b.B other() }\n",
    );
    assert!(p.reload().unwrap());
    assert_eq!(p.current().paths().len(), 3);
    write(
        &inc.join("b.thrift"),
        "struct B { 1: i32 y, 2: string w }\n",
    );
    assert!(p.reload().unwrap());
    let b = p.current().struct_named("B").unwrap();
    assert_eq!(p.current().struct_desc(b).fields.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_first_read_must_load() {
    let dir = scratch("first");
    let idl = dir.join("svc.thrift");
    write(&idl, "service S { Nope a() }\n");
    assert!(IdlProvider::new(&[&idl], &[] as &[&Path]).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The watch task reloads on its timer (tokio's clock, paused: no real waiting) and
/// stops when its handle is dropped.
#[tokio::test(start_paused = true)]
async fn the_watch_reloads_on_its_timer_until_dropped() {
    let dir = scratch("watch");
    let idl = dir.join("svc.thrift");
    write(&idl, "service S { void a() }\n");
    let p = Arc::new(IdlProvider::new(&[&idl], &[] as &[&Path]).unwrap());
    let every = Duration::from_secs(5);
    let watch = p.watch(every);

    write(&idl, "service S { void a(), void b() }\n");
    let mut ticks = 0;
    while methods(&p).len() == 1 {
        ticks += 1;
        assert!(ticks <= 3, "not reloaded within three ticks");
        tokio::time::sleep(every).await;
    }
    assert_eq!(methods(&p), ["a", "b"]);

    drop(watch);
    write(&idl, "service S { void a(), void b(), void c() }\n");
    for _ in 0..3 {
        tokio::time::sleep(every).await;
    }
    assert_eq!(
        methods(&p),
        ["a", "b"],
        "no reload after the watch is dropped"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
