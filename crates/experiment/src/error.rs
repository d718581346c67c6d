//! The one error type of experiment files: where (file, line, dotted field)
//! and what, displayed on one line as `{file}:{line}: {field}: {message}`.

use std::fmt;

/// A bad experiment file, located as precisely as the parser allows.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line, when the problem has a place in the file.
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `clock.offset_ms_stddev` or
    /// `faults[1].node`; empty when the problem is the whole file.
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(file: &str, line: Option<usize>, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError { file: file.to_string(), line, field: field.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        let message: Vec<&str> = self.message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        write!(f, ": {}", message.join("; "))
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_with_every_part() {
        let e = ConfigError::new("x.toml", Some(14), "clock.drift_ppm", "bad\nvery bad");
        assert_eq!(e.to_string(), "x.toml:14: clock.drift_ppm: bad; very bad");
        let e = ConfigError::new("x.toml", None, "", "cannot read file");
        assert_eq!(e.to_string(), "x.toml: cannot read file");
    }
}
