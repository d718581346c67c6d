//! Protocol parameters (`[protocol.params]`), typed and checked.
//!
//! Every protocol lists its knobs as [`ParamDoc`]s; unknown keys and values of
//! the wrong type are errors that name the parameter.

use std::collections::BTreeMap;
use std::fmt;

/// A parameter value as written in the experiment file.
#[derive(Clone, PartialEq, Debug)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A documented parameter: name (unit last), default as written in TOML,
/// and what it does.
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// The parameters of one run, by name.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Params {
    values: BTreeMap<String, ParamValue>,
}

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    pub fn set(&mut self, name: &str, value: ParamValue) {
        self.values.insert(name.to_string(), value);
    }

    pub fn with(mut self, name: &str, value: ParamValue) -> Params {
        self.set(name, value);
        self
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Rejects any parameter the protocol does not document.
    pub fn check_known(&self, protocol: &str, docs: &[ParamDoc]) -> Result<(), String> {
        for name in self.values.keys() {
            if !docs.iter().any(|d| d.name == name) {
                let known: Vec<&str> = docs.iter().map(|d| d.name).collect();
                return Err(format!(
                    "unknown parameter `{name}` for protocol {protocol} (known: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ));
            }
        }
        Ok(())
    }

    pub fn f64_or(&self, name: &str, default: f64) -> Result<f64, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(ParamValue::Float(x)) => Ok(*x),
            Some(ParamValue::Int(i)) => Ok(*i as f64),
            Some(other) => Err(format!("parameter `{name}` must be a number, got {other}")),
        }
    }

    /// A duration given in milliseconds, in nanoseconds: from a microsecond
    /// to a day, so that ticks and timeouts stay sane.
    pub fn ms_ns_or(&self, name: &str, default_ms: f64) -> Result<u64, String> {
        let v = self.f64_or(name, default_ms)?;
        if !(0.001..=86_400_000.0).contains(&v) {
            return Err(format!("parameter `{name}` must be between 0.001 and 86400000 ms, got {v}"));
        }
        Ok(crate::time::ms_to_ns(v))
    }

    pub fn u64_or(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(ParamValue::Int(i)) if *i >= 0 => Ok(*i as u64),
            Some(other) => Err(format!("parameter `{name}` must be a non-negative integer, got {other}")),
        }
    }

    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(ParamValue::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("parameter `{name}` must be true or false, got {other}")),
        }
    }

    pub fn str_or<'a>(&'a self, name: &str, default: &'a str) -> Result<&'a str, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(ParamValue::Str(s)) => Ok(s),
            Some(other) => Err(format!("parameter `{name}` must be a string, got {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCS: &[ParamDoc] = &[ParamDoc { name: "timeout_ms", default: "100", doc: "a timeout" }];

    #[test]
    fn unknown_and_mistyped_parameters_are_named() {
        let p = Params::new().with("timeot_ms", ParamValue::Int(3));
        let err = p.check_known("x", DOCS).unwrap_err();
        assert!(err.contains("`timeot_ms`") && err.contains("timeout_ms"), "{err}");
        let p = Params::new().with("timeout_ms", ParamValue::Str("fast".into()));
        assert!(p.check_known("x", DOCS).is_ok());
        let err = p.f64_or("timeout_ms", 1.0).unwrap_err();
        assert!(err.contains("`timeout_ms`"), "{err}");
    }

    #[test]
    fn defaults_apply_and_ints_widen_to_floats() {
        let p = Params::new().with("a", ParamValue::Int(3));
        assert_eq!(p.f64_or("a", 1.0), Ok(3.0));
        assert_eq!(p.u64_or("b", 7), Ok(7));
        assert_eq!(p.bool_or("c", true), Ok(true));
        assert!(Params::new().with("n", ParamValue::Int(-1)).u64_or("n", 0).is_err());
    }
}
