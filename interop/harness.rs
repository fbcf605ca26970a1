//! What the Apache Thrift interop tests share (`crates/thrift-codec/tests/interop.rs`,
//! `crates/codegen-check/tests/interop.rs`, `examples/tests/interop.rs` and
//! `crates/thrift-generic/tests/interop.rs`, which include this file with `#[path]`):
//! hex, the JSON lines the scripts write, finding the tools, a temporary directory,
//! running a script of this folder, and `rpc.py`'s server.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.is_ascii() || !s.len().is_multiple_of(2) {
        return Err("not an even number of hex digits".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("bad hex: {e}")))
        .collect()
}

/// Where two encodings first differ, with some context, and both in full.
pub fn hex_diff(apache: &[u8], ours: &[u8]) -> String {
    let n = apache
        .iter()
        .zip(ours)
        .position(|(a, b)| a != b)
        .unwrap_or(apache.len().min(ours.len()));
    let lo = n.saturating_sub(16);
    let window = |b: &[u8]| hex(&b[lo.min(b.len())..(n + 24).min(b.len())]);
    format!(
        "lengths {} (Apache) vs {} (ours), first difference at byte {n}:\n\
         {:>12}: ...{}\n{:>12}: ...{}\n{:>12}: {}\n{:>12}: {}",
        apache.len(),
        ours.len(),
        "Apache",
        window(apache),
        "ours",
        window(ours),
        "Apache, all",
        hex(apache),
        "ours, all",
        hex(ours)
    )
}

#[derive(Debug, PartialEq)]
pub enum Json {
    Str(String),
    Bool(bool),
}

/// A flat JSON object of strings and booleans, all that the interop scripts write.
pub fn parse_json_line(line: &str) -> Result<BTreeMap<String, Json>, String> {
    let mut chars = line.trim().chars().peekable();
    let mut out = BTreeMap::new();
    let skip_ws = |c: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while c.peek().is_some_and(|c| c.is_whitespace()) {
            c.next();
        }
    };
    let string = |c: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Result<String, String> {
        if c.next() != Some('"') {
            return Err("expected a string".into());
        }
        let mut s = String::new();
        loop {
            match c.next().ok_or("unterminated string")? {
                '"' => return Ok(s),
                '\\' => match c.next().ok_or("unterminated escape")? {
                    'u' => {
                        let code: String = c.by_ref().take(4).collect();
                        let code = u32::from_str_radix(&code, 16).map_err(|e| e.to_string())?;
                        s.push(char::from_u32(code).ok_or("surrogate escape unsupported")?);
                    }
                    'n' => s.push('\n'),
                    't' => s.push('\t'),
                    other => s.push(other),
                },
                ch => s.push(ch),
            }
        }
    };
    if chars.next() != Some('{') {
        return Err("expected '{'".into());
    }
    loop {
        skip_ws(&mut chars);
        if chars.peek() == Some(&'}') {
            break;
        }
        let key = string(&mut chars)?;
        skip_ws(&mut chars);
        if chars.next() != Some(':') {
            return Err("expected ':'".into());
        }
        skip_ws(&mut chars);
        let value = match chars.peek() {
            Some('"') => Json::Str(string(&mut chars)?),
            _ => {
                let word: String =
                    std::iter::from_fn(|| chars.next_if(|c| c.is_alphabetic())).collect();
                match word.as_str() {
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    other => return Err(format!("unsupported JSON value {other:?}")),
                }
            }
        };
        out.insert(key, value);
        skip_ws(&mut chars);
        match chars.next() {
            Some(',') => continue,
            Some('}') => break,
            _ => return Err("expected ',' or '}'".into()),
        }
    }
    Ok(out)
}

pub fn get_str<'a>(obj: &'a BTreeMap<String, Json>, key: &str) -> Result<&'a str, String> {
    match obj.get(key) {
        Some(Json::Str(s)) => Ok(s),
        _ => Err(format!("no string field {key:?}")),
    }
}

pub fn get_bool(obj: &BTreeMap<String, Json>, key: &str) -> Result<bool, String> {
    match obj.get(key) {
        Some(Json::Bool(b)) => Ok(*b),
        _ => Err(format!("no boolean field {key:?}")),
    }
}

// ---------------------------------------------------------------------------------------
// The environment: tools, temporary directory.

/// The repository: the nearest directory above the including crate that holds this
/// folder (crates sit at different depths).
pub fn repo_root() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .find(|d| d.join("interop/harness.rs").is_file())
        .unwrap_or_else(|| panic!("no interop/ folder above {}", start.display()))
        .to_path_buf()
}

pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

pub fn thrift() -> String {
    std::env::var("THRIFT").unwrap_or_else(|_| "thrift".into())
}

/// `Err` naming what is missing.
pub fn tools_present() -> Result<(), String> {
    let mut missing = Vec::new();
    let ok = |cmd: &mut Command| cmd.output().is_ok_and(|o| o.status.success());
    if !ok(Command::new(thrift()).arg("--version")) {
        missing.push(format!(
            "the Apache Thrift compiler `{}` (apt-get install -y thrift-compiler)",
            thrift()
        ));
    }
    if !ok(Command::new(python()).args([
        "-c",
        "import thrift.Thrift, thrift.protocol.TBinaryProtocol, thrift.protocol.TCompactProtocol",
    ])) {
        missing.push(format!(
            "`{}` with the Apache Thrift library (pip install thrift)",
            python()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join(" and "))
    }
}

/// A fresh directory, removed when dropped unless the test failed.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creates the temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn run_apache(script: &str, args: &[&str], tmp: &TempDir) -> std::process::Output {
    let script = repo_root().join("interop").join(script);
    Command::new(python())
        .arg(&script)
        .args(args)
        .arg("--gen-dir")
        .arg(tmp.0.join("gen-py"))
        .arg("--thrift")
        .arg(thrift())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} {}: {e}", python(), script.display()))
}

/// One interop test: `script gen` writes Apache's encodings, which `check_line` checks
/// line by line (recording `(case, protocol)` in the set it is given); then `encode`
/// gives ours for each case and protocol (`None` leaves a case out), which `script
/// check` decodes with Apache. `label` names our side in messages and the temporary
/// directory. Skips with a message when the tools are missing, unless `CI` is set.
/// The protocols are Binary and Compact; [`run_interop_in`] names others.
pub fn run_interop(
    script: &str,
    label: &str,
    cases: &[&str],
    check_line: impl FnMut(&str, &mut std::collections::HashSet<(String, String)>) -> Result<(), String>,
    encode: impl Fn(&str, &str) -> Option<Vec<u8>>,
) {
    run_interop_in(
        script,
        label,
        &["binary", "compact"],
        cases,
        check_line,
        encode,
    )
}

/// [`run_interop`] over `protocols`: every case must have a line of Apache's in each, and
/// `encode` is asked for ours in each.
pub fn run_interop_in(
    script: &str,
    label: &str,
    protocols: &[&str],
    cases: &[&str],
    mut check_line: impl FnMut(
        &str,
        &mut std::collections::HashSet<(String, String)>,
    ) -> Result<(), String>,
    encode: impl Fn(&str, &str) -> Option<Vec<u8>>,
) {
    let started = std::time::Instant::now();
    if let Err(missing) = tools_present() {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("the interop test needs {missing}; CI is set, so this is a failure");
        }
        eprintln!("skipped: the Apache Thrift interop test ({label}) needs {missing}");
        return;
    }
    let tmp = TempDir::new(&format!("{label}-interop"));
    let mut failures = Vec::new();

    // 1. Apache → ours.
    let apache_file = tmp.0.join("apache.jsonl");
    let out = run_apache(
        script,
        &["gen", "--out", apache_file.to_str().unwrap()],
        &tmp,
    );
    assert!(
        out.status.success(),
        "{script} gen failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = std::fs::read_to_string(&apache_file).expect("reads the script's output");
    let mut seen = std::collections::HashSet::new();
    let mut checked = 0;
    for (i, line) in lines
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        checked += 1;
        if let Err(e) = check_line(line, &mut seen) {
            let what = parse_json_line(line)
                .ok()
                .and_then(|o| {
                    Some(format!(
                        "{}/{}",
                        get_str(&o, "case").ok()?,
                        get_str(&o, "protocol").ok()?
                    ))
                })
                .unwrap_or_default();
            failures.push(format!("Apache → {label}, line {} {what}: {e}", i + 1));
        }
    }
    for name in cases {
        for &protocol in protocols {
            if !seen.contains(&(name.to_string(), protocol.to_string())) {
                failures.push(format!("{script} gen wrote no {name}/{protocol}"));
            }
        }
    }

    // 2. Ours → Apache.
    let mut ours = String::new();
    let mut written = 0;
    for name in cases {
        for &protocol in protocols {
            let Some(bytes) = encode(name, protocol) else {
                continue;
            };
            ours.push_str(&format!(
                "{{\"case\": \"{name}\", \"protocol\": \"{protocol}\", \"hex\": \"{}\"}}\n",
                hex(&bytes)
            ));
            written += 1;
        }
    }
    let ours_file = tmp.0.join("ours.jsonl");
    std::fs::write(&ours_file, ours).expect("writes our encodings");
    let out = run_apache(script, &["check", ours_file.to_str().unwrap()], &tmp);
    if !out.status.success() {
        failures.push(format!(
            "{label} → Apache: {script} check failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }

    assert!(
        failures.is_empty(),
        "{} interop failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "interop: {checked} Apache encodings decoded by {label}, {written} of its encodings \
         decoded by Apache, in {:.1?}\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stdout).trim_end(),
    );
}

/// `rpc.py` with its generated code in `tmp`; the subcommand and options follow.
pub fn rpc_py(tmp: &TempDir) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(repo_root().join("interop/rpc.py"))
        .arg("--gen-dir")
        .arg(tmp.0.join("gen-py"))
        .arg("--thrift")
        .arg(thrift());
    cmd
}

/// Apache's Python server of echo (`rpc.py server`) for one transport and protocol, on
/// 127.0.0.1:`port`; stopped when dropped.
pub struct PythonServer {
    pub child: std::process::Child,
    pub port: u16,
}

impl PythonServer {
    /// `rpc.py server` with `extra` options.
    pub fn start(tmp: &TempDir, transport: &str, protocol: &str, extra: &[&str]) -> PythonServer {
        let mut child = rpc_py(tmp)
            .args(["server", "--transport", transport, "--protocol", protocol])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the Python server printed {line:?}, not its port"));
        PythonServer { child, port }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        // Closing its stdin ends it; kill in case it hangs.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
