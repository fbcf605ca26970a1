//! A small command-line reader for the example programs: `--name value` and `--flag`.

use std::collections::HashMap;
use std::str::FromStr;

/// Parsed `--name value` options and `--flag`s.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

/// A bad command line: the message says what and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Args {
    /// Reads `args` (without the program name). `flags` names the options that take no
    /// value; every other `--name` takes the next argument.
    pub fn parse(args: impl IntoIterator<Item = String>, flags: &[&str]) -> Result<Args, Usage> {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(Usage(format!("unexpected argument {arg:?}")));
            };
            if let Some((name, value)) = name.split_once('=') {
                out.values.insert(name.to_string(), value.to_string());
            } else if flags.contains(&name) {
                out.flags.push(name.to_string());
            } else {
                let value = it
                    .next()
                    .ok_or_else(|| Usage(format!("--{name} needs a value")))?;
                out.values.insert(name.to_string(), value);
            }
        }
        Ok(out)
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// `--name`'s value parsed, or `default` when absent.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, Usage>
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| Usage(format!("--{name} {v:?}: {e}"))),
        }
    }

    /// `--name`'s value parsed, or `None` when absent.
    pub fn optional<T: FromStr>(&self, name: &str) -> Result<Option<T>, Usage>
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|e| Usage(format!("--{name} {v:?}: {e}"))),
        }
    }

    /// `--name`'s value, which must be given.
    pub fn required<T: FromStr>(&self, name: &str) -> Result<T, Usage>
    where
        T::Err: std::fmt::Display,
    {
        let v = self
            .values
            .get(name)
            .ok_or_else(|| Usage(format!("--{name} is required")))?;
        v.parse().map_err(|e| Usage(format!("--{name} {v:?}: {e}")))
    }

    /// Fails on an option not in `known` (a typo would otherwise be ignored).
    pub fn only(&self, known: &[&str]) -> Result<(), Usage> {
        for name in self.values.keys().chain(self.flags.iter()) {
            if !known.contains(&name.as_str()) {
                return Err(Usage(format!("unknown option --{name}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn values_flags_and_errors() {
        let a = Args::parse(
            args("--addr 127.0.0.1:1 --multiplex --size=512"),
            &["multiplex"],
        )
        .unwrap();
        assert_eq!(a.required::<String>("addr").unwrap(), "127.0.0.1:1");
        assert_eq!(a.get("size", 0usize).unwrap(), 512);
        assert_eq!(a.get("concurrency", 7usize).unwrap(), 7);
        assert_eq!(a.optional::<usize>("size").unwrap(), Some(512));
        assert_eq!(a.optional::<usize>("concurrency").unwrap(), None);
        assert!(a.optional::<usize>("addr").is_err());
        assert!(a.flag("multiplex"));
        assert!(a.only(&["addr", "multiplex", "size"]).is_ok());
        assert!(a.only(&["addr"]).is_err());
        assert!(a.get::<usize>("addr", 0).is_err());
        assert!(Args::parse(args("--addr"), &[]).is_err());
        assert!(Args::parse(args("stray"), &[]).is_err());
        assert!(
            Args::parse(args(""), &[])
                .unwrap()
                .required::<String>("addr")
                .is_err()
        );
    }
}
