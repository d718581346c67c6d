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

impl ParamDoc {
    /// The default as the value a file would give: a bool, an integer, a
    /// number, or else a string (a quoted TOML default loses its quotes).
    pub fn default_value(&self) -> ParamValue {
        let d = self.default;
        d.parse::<bool>()
            .map(ParamValue::Bool)
            .or_else(|_| d.parse::<i64>().map(ParamValue::Int))
            .or_else(|_| d.parse::<f64>().map(ParamValue::Float))
            .unwrap_or_else(|_| ParamValue::Str(d.trim_matches('"').to_string()))
    }
}

/// Each documented parameter set alone to its written default: a
/// protocol's tests check that every one parses (and so is documented
/// and read under the name it is documented by).
pub fn each_default_alone(docs: &'static [ParamDoc]) -> impl Iterator<Item = (&'static str, Params)> {
    docs.iter().map(|d| (d.name, Params::new().with(d.name, d.default_value())))
}

/// A documented report counter (`Env::count`): name and meaning. Each
/// protocol lists every counter it emits ([`crate::Protocol::counters`]);
/// the simulator fails a run that counts one not listed.
#[derive(Clone, Copy, Debug)]
pub struct CounterDoc {
    pub name: &'static str,
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

/// How a duration becomes whole ticks ([`ParamReader::ms_ticks`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Rounding {
    /// Whole ticks that fit in it: it fires no later than asked (plus a
    /// tick's resolution).
    Down,
    /// Ticks enough to cover it: it never fires early.
    Up,
}

/// `ns` in whole periods of `tick_ns`, rounded as asked and clamped into
/// `range`.
pub fn ticks_of(ns: u64, tick_ns: u64, rounding: Rounding, range: std::ops::RangeInclusive<u64>) -> u64 {
    assert!(tick_ns > 0, "a tick lasts");
    let ticks = match rounding {
        Rounding::Down => ns / tick_ns,
        Rounding::Up => ns.div_ceil(tick_ns),
    };
    ticks.clamp(*range.start(), *range.end())
}

/// A protocol's parameters read against its documented list
/// ([`ParamDoc`]s): every name read must be documented, and a parameter
/// left out takes the default its documentation states, so the table a
/// user reads (`meridian protocols`) and the code cannot disagree. Errors
/// name the parameter and what it must be.
#[derive(Clone, Copy)]
pub struct ParamReader<'a> {
    params: &'a Params,
    docs: &'static [ParamDoc],
}

impl<'a> ParamReader<'a> {
    /// Rejects undocumented parameters first (naming the protocol).
    pub fn new(params: &'a Params, protocol: &str, docs: &'static [ParamDoc]) -> Result<Self, String> {
        params.check_known(protocol, docs)?;
        Ok(ParamReader { params, docs })
    }

    /// The documented default of `name`, as written in TOML. Reading an
    /// undocumented name is a bug in the protocol, not bad input.
    fn default_of(&self, name: &str) -> &'static str {
        match self.docs.iter().find(|d| d.name == name) {
            Some(d) => d.default,
            None => panic!("parameter `{name}` is read but not documented"),
        }
    }

    fn default_f64(&self, name: &str) -> f64 {
        let text = self.default_of(name);
        text.parse().unwrap_or_else(|_| panic!("parameter `{name}`'s documented default {text} is not a number"))
    }

    /// Whether the run sets `name` itself.
    pub fn is_set(&self, name: &str) -> bool {
        self.default_of(name);
        self.params.values.contains_key(name)
    }

    /// The raw value, if set.
    pub fn value(&self, name: &str) -> Option<&'a ParamValue> {
        self.default_of(name);
        self.params.values.get(name)
    }

    pub fn f64(&self, name: &str) -> Result<f64, String> {
        self.params.f64_or(name, self.default_f64(name))
    }

    /// A number within `range`.
    pub fn f64_in(&self, name: &str, range: std::ops::RangeInclusive<f64>) -> Result<f64, String> {
        let v = self.f64(name)?;
        if !range.contains(&v) {
            return Err(format!("parameter `{name}` must be between {} and {}, got {v}", range.start(), range.end()));
        }
        Ok(v)
    }

    /// A duration in milliseconds (`_ms`), in nanoseconds, from a
    /// microsecond to a day.
    pub fn ms_ns(&self, name: &str) -> Result<u64, String> {
        debug_assert!(name.ends_with("_ms"), "`{name}`: a duration's name ends in its unit");
        self.params.ms_ns_or(name, self.default_f64(name))
    }

    /// A duration in milliseconds (`_ms`) as whole periods of `tick_ns`,
    /// rounded as the caller states and clamped into `range` (see
    /// [`ticks_of`]).
    pub fn ms_ticks(
        &self,
        name: &str,
        tick_ns: u64,
        rounding: Rounding,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, String> {
        Ok(ticks_of(self.ms_ns(name)?, tick_ns, rounding, range))
    }

    /// An integer within `range` (counts, sizes, bounds).
    pub fn count(&self, name: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
        let text = self.default_of(name);
        let default =
            text.parse().unwrap_or_else(|_| panic!("parameter `{name}`'s documented default {text} is not an integer"));
        let v = self.params.u64_or(name, default)?;
        if !range.contains(&v) {
            return Err(format!("parameter `{name}` must be between {} and {}, got {v}", range.start(), range.end()));
        }
        Ok(v)
    }

    pub fn bool(&self, name: &str) -> Result<bool, String> {
        let text = self.default_of(name);
        let default =
            text.parse().unwrap_or_else(|_| panic!("parameter `{name}`'s documented default {text} is not a boolean"));
        self.params.bool_or(name, default)
    }

    /// One of `choices` (a string; the documented default is one of them,
    /// quoted as in TOML).
    pub fn choice(&self, name: &str, choices: &[&'static str]) -> Result<&'static str, String> {
        let default = self.default_of(name).trim_matches('"');
        let given = self.params.str_or(name, default)?;
        choices.iter().copied().find(|c| *c == given).ok_or_else(|| {
            let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
            format!("parameter `{name}` must be {}, got {given:?}", quoted.join(" or "))
        })
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

    const READER_DOCS: &[ParamDoc] = &[
        ParamDoc { name: "timeout_ms", default: "100", doc: "a timeout" },
        ParamDoc { name: "rounds_max", default: "5", doc: "a bound" },
        ParamDoc { name: "quorum", default: "\"super\"", doc: "a choice" },
        ParamDoc { name: "fast", default: "true", doc: "a switch" },
    ];

    #[test]
    fn a_reader_takes_defaults_from_the_documentation_and_names_bad_values() {
        let none = Params::new();
        let r = ParamReader::new(&none, "x", READER_DOCS).unwrap();
        assert_eq!(r.ms_ns("timeout_ms"), Ok(100_000_000));
        assert_eq!(r.count("rounds_max", 1..=10), Ok(5));
        assert_eq!(r.choice("quorum", &["super", "simple"]), Ok("super"));
        assert_eq!(r.bool("fast"), Ok(true));
        let bad = Params::new().with("rounds_max", ParamValue::Int(11)).with("quorum", ParamValue::Str("big".into()));
        let r = ParamReader::new(&bad, "x", READER_DOCS).unwrap();
        assert_eq!(
            r.count("rounds_max", 1..=10).unwrap_err(),
            "parameter `rounds_max` must be between 1 and 10, got 11"
        );
        assert_eq!(
            r.choice("quorum", &["super", "simple"]).unwrap_err(),
            "parameter `quorum` must be \"super\" or \"simple\", got \"big\""
        );
        let unknown = Params::new().with("timeot_ms", ParamValue::Int(1));
        assert!(ParamReader::new(&unknown, "x", READER_DOCS).err().unwrap().contains("`timeot_ms`"));
    }

    #[test]
    fn a_duration_becomes_ticks_rounded_as_asked_and_within_its_range() {
        let none = Params::new();
        let r = ParamReader::new(&none, "x", READER_DOCS).unwrap();
        let tick_ns = 30_000_000;
        assert_eq!(r.ms_ticks("timeout_ms", tick_ns, Rounding::Down, 1..=10), Ok(3), "100 ms: three whole ticks");
        assert_eq!(r.ms_ticks("timeout_ms", tick_ns, Rounding::Up, 1..=10), Ok(4), "100 ms: four to cover it");
        assert_eq!(r.ms_ticks("timeout_ms", tick_ns, Rounding::Up, 1..=2), Ok(2), "at most the range's end");
        assert_eq!(ticks_of(5, tick_ns, Rounding::Down, 1..=10), 1, "at least the range's start");
        assert_eq!(ticks_of(60_000_000, tick_ns, Rounding::Up, 0..=10), 2, "an exact multiple is not rounded");
    }

    #[test]
    #[should_panic(expected = "not documented")]
    fn reading_an_undocumented_parameter_is_a_bug() {
        let none = Params::new();
        let _ = ParamReader::new(&none, "x", READER_DOCS).unwrap().f64("other");
    }
}
