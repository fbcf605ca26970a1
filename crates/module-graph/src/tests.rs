use super::*;

#[test]
fn the_parser_sees_every_form_of_path() {
    let code = "use crate::a::B;\nlet x = crate::c::d();\nuse crate::{e::F, g, h::{I, J}};";
    assert_eq!(crate_paths(code), ["a", "c", "e", "g", "h"]);
    let lib = "pub use config::{Config, Exhaustion};\npub use stream::Stream;";
    let names = reexports(lib);
    assert_eq!(names["Exhaustion"], "config");
    assert_eq!(names["Stream"], "stream");
}

#[test]
fn a_cycle_is_found_and_named() {
    let edges = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")];
    assert_eq!(
        Graph::from_edges(edges).cycle().unwrap(),
        ["a", "b", "c", "a"]
    );
    let acyclic = [("a", "b"), ("b", "c"), ("d", "a")];
    assert_eq!(Graph::from_edges(acyclic).cycle(), None);
}

#[test]
fn a_test_tail_starts_at_its_cfg_line() {
    let text = "use crate::a;\n#[cfg(test)]\nfn helper() {}\n#[cfg(test)]\nmod tests {\n}\n";
    let tail = test_tail(text);
    assert_eq!(&text[tail..], "#[cfg(test)]\nmod tests {\n}\n");
    assert_eq!(test_tail("use crate::a;\n"), "use crate::a;\n".len());
}

/// Writes a small crate under a fresh temporary folder and reads it both ways.
#[test]
fn a_crate_is_read_with_and_without_its_tests() {
    let root = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let src = root.join("src");
    let files = [
        (
            "lib.rs",
            "mod a;\npub mod b;\nmod c;\n#[cfg(test)]\nmod helpers;\npub use c::Thing;\n",
        ),
        ("bin/tool.rs", "use crate::a::Y;\n"),
        ("helpers.rs", "use crate::b::Z;\n"),
        (
            "a.rs",
            "// crate::c is named in a comment only\nuse crate::b::X;\n",
        ),
        ("b/mod.rs", "mod deep;\n"),
        ("b/deep/leaf.rs", "use crate::Thing;\n"),
        ("b/tests.rs", "use crate::a::Y;\n"),
        (
            "c.rs",
            "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n",
        ),
    ];
    for (path, text) in files {
        let path = src.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let shipped = Graph::read(&src, Code::WithoutTests).unwrap();
    let all = Graph::read(&src, Code::WithTests).unwrap();
    fs::remove_dir_all(&root).unwrap();

    assert_eq!(shipped.modules().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(shipped.uses("a").collect::<Vec<_>>(), ["b"]);
    assert_eq!(shipped.uses("b").collect::<Vec<_>>(), ["c"], "via Thing");
    assert_eq!(shipped.uses("c").count(), 0);
    assert_eq!(shipped.cycle(), None);

    assert_eq!(
        all.modules().collect::<Vec<_>>(),
        ["a", "b", "c", "helpers"]
    );
    assert_eq!(all.uses("helpers").collect::<Vec<_>>(), ["b"]);
    assert_eq!(all.uses("b").collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(all.uses("c").collect::<Vec<_>>(), ["a"]);
    assert_eq!(all.cycle().unwrap(), ["a", "b", "a"]);
}
