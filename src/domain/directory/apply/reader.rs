//! The reading of one declaration file's entries: each key taken once (what is left is
//! unknown), values checked as they are read, every problem kept with its line and key.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::domain::model::SessionType;
use crate::domain::model::slots::{MEM, ResourceSlots};

/// One declaration file's text and the name its problems are reported under.
pub struct Source {
    pub name: String,
    pub text: String,
}

/// What is wrong in a declaration, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    /// The key path, e.g. `users."alice@example.com".role`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}:{}: {}: {}", self.file, self.line, self.key, self.message)
        }
    }
}

/// A name one entry refers to, checked once every file is read.
pub(super) struct Ref {
    pub(super) section: &'static str,
    pub(super) name: String,
    pub(super) file: String,
    pub(super) line: usize,
    pub(super) key: String,
    pub(super) what: &'static str,
}

pub(super) fn quoted(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

pub(super) struct Reader<'a> {
    pub(super) source: &'a Source,
    pub(super) problems: &'a mut Vec<Problem>,
    pub(super) known_slots: &'a BTreeSet<String>,
    /// Where each line break of the source is: a line number is a binary search, so
    /// reading stays linear in the size of the declaration.
    breaks: Vec<usize>,
}

pub(super) type Table<'t> = DeTable<'t>;

impl<'a> Reader<'a> {
    pub(super) fn new(source: &'a Source, problems: &'a mut Vec<Problem>, known_slots: &'a BTreeSet<String>) -> Self {
        let breaks = source.text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i).collect();
        Self { source, problems, known_slots, breaks }
    }

    /// The line (from 1) of byte `offset` of the source.
    pub(super) fn line(&self, offset: usize) -> usize {
        self.breaks.partition_point(|b| *b < offset) + 1
    }

    pub(super) fn problem_at(&mut self, line: usize, key: &str, message: String) {
        self.problems.push(Problem { file: self.source.name.clone(), line, key: key.to_owned(), message });
    }

    pub(super) fn problem(&mut self, span: Range<usize>, key: &str, message: String) {
        let line = self.line(span.start);
        self.problem_at(line, key, message);
    }

    pub(super) fn table<'v, 't>(&mut self, key: &str, value: &'v Spanned<DeValue<'t>>) -> Option<&'v Table<'t>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.problem(value.span(), key, format!("expected a table, found {}", other.type_str()));
                None
            }
        }
    }
}

/// One entry being read: its fields, each taken once; what is left is unknown.
pub(super) struct Entry<'r, 'a, 'v, 't> {
    pub(super) r: &'r mut Reader<'a>,
    pub(super) path: String,
    pub(super) fields: &'v Table<'t>,
    pub(super) line: usize,
}

impl<'v, 't> Entry<'_, '_, 'v, 't> {
    pub(super) fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    pub(super) fn value(&self, key: &str) -> Option<&'v Spanned<DeValue<'t>>> {
        self.fields.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(_, v)| v)
    }

    pub(super) fn bad(&mut self, key: &str, span: Range<usize>, message: String) {
        let path = self.key(key);
        self.r.problem(span, &path, message);
    }

    pub(super) fn missing(&mut self, key: &str) {
        let (line, path) = (self.line, self.key(key));
        self.r.problem_at(line, &path, "is required".to_owned());
    }

    /// Reports every key not in `allowed`.
    pub(super) fn only(&mut self, allowed: &[super::keys::Key]) {
        let allowed = super::keys::names(allowed);
        for (k, _) in self.fields {
            let name = k.get_ref().as_ref();
            if !allowed.contains(&name) {
                let message = format!("unknown key; the keys here are {}", allowed.join(", "));
                let path = self.key(name);
                self.r.problem(k.span(), &path, message);
            }
        }
    }

    pub(super) fn string(&mut self, key: &str) -> Option<String> {
        let v = self.value(key)?;
        match v.get_ref() {
            DeValue::String(s) if s.contains('\0') => {
                self.bad(key, v.span(), "has a NUL character".to_owned());
                None
            }
            DeValue::String(s) => Some(s.as_ref().to_owned()),
            other => {
                self.bad(key, v.span(), format!("expected a string, found {}", other.type_str()));
                None
            }
        }
    }

    pub(super) fn required_string(&mut self, key: &str) -> Option<String> {
        if self.value(key).is_none() {
            self.missing(key);
        }
        self.string(key)
    }

    pub(super) fn boolean(&mut self, key: &str, default: bool) -> bool {
        let Some(v) = self.value(key) else { return default };
        match v.get_ref() {
            DeValue::Boolean(b) => *b,
            other => {
                self.bad(key, v.span(), format!("expected true or false, found {}", other.type_str()));
                default
            }
        }
    }

    /// An integer of at least `min` and at most `max`.
    pub(super) fn integer(&mut self, key: &str, min: i64, max: i64) -> Option<i64> {
        let v = self.value(key)?;
        let n = match v.get_ref() {
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix()).ok(),
            _ => None,
        };
        match n {
            Some(n) if n >= i128::from(min) && n <= i128::from(max) => i64::try_from(n).ok(),
            Some(n) => {
                self.bad(key, v.span(), format!("must be between {min} and {max}, not {n}"));
                None
            }
            None => {
                self.bad(key, v.span(), "expected a whole number".to_owned());
                None
            }
        }
    }

    pub(super) fn strings(&mut self, key: &str) -> Option<Vec<(String, Range<usize>)>> {
        let v = self.value(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.bad(key, v.span(), format!("expected an array of strings, found {}", v.get_ref().type_str()));
            return None;
        };
        let mut out = Vec::new();
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => {
                    if out.iter().any(|(o, _)| o == s.as_ref()) {
                        self.bad(key, item.span(), format!("{:?} is listed twice", s.as_ref()));
                    } else {
                        out.push((s.as_ref().to_owned(), item.span()));
                    }
                }
                other => self.bad(key, item.span(), format!("expected a string, found {}", other.type_str())),
            }
        }
        Some(out)
    }

    pub(super) fn session_types(&mut self, key: &str) -> Option<Vec<SessionType>> {
        let names = self.strings(key)?;
        let mut types = Vec::new();
        for (name, span) in names {
            match SessionType::parse(&name.to_uppercase()) {
                Some(t) if types.contains(&t) => self.bad(key, span, format!("{name:?} is listed twice")),
                Some(t) => types.push(t),
                None => self.bad(key, span, format!("unknown session type {name:?}; the types are {}", type_names())),
            }
        }
        if types.is_empty() {
            let span = self.value(key).map(|v| v.span()).unwrap_or_default();
            self.bad(key, span, "names at least one session type".to_owned());
            return None;
        }
        Some(types)
    }

    /// Resource slots: known slot names to non-negative amounts; memory also as "64 GiB".
    pub(super) fn slots(&mut self, key: &str) -> ResourceSlots {
        let mut slots = ResourceSlots::new();
        let Some(v) = self.value(key) else { return slots };
        let DeValue::Table(t) = v.get_ref() else {
            self.bad(key, v.span(), format!("expected a table of slot amounts, found {}", v.get_ref().type_str()));
            return slots;
        };
        for (slot, amount) in t {
            let slot = slot.get_ref().as_ref();
            let path = format!("{key}.{}", quoted(slot));
            if !self.r.known_slots.contains(slot) {
                let known: Vec<&str> = self.r.known_slots.iter().map(String::as_str).collect();
                let hint = if amount.get_ref().is_table() { " (quote a dotted name: \"cuda.device\" = 1)" } else { "" };
                self.bad(&path, amount.span(), format!("unknown slot{hint}; the slots are {}", known.join(", ")));
                continue;
            }
            let parsed = match amount.get_ref() {
                DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok().map(|n| n as f64),
                DeValue::Float(f) => f.as_str().parse::<f64>().ok().filter(|x| x.is_finite()),
                DeValue::String(s) if slot == MEM => bytes(s.as_ref()),
                _ => None,
            };
            match parsed {
                Some(n) if n >= 0.0 => slots.set(slot, n),
                Some(n) => self.bad(&path, amount.span(), format!("must not be negative, not {n}")),
                None if slot == MEM => {
                    self.bad(&path, amount.span(), "expected a number of bytes or a size such as \"64 GiB\"".to_owned())
                }
                None => self.bad(&path, amount.span(), "expected a number".to_owned()),
            }
        }
        slots
    }

    pub(super) fn reference(
        &mut self,
        refs: &mut Vec<Ref>,
        key: &str,
        span: Range<usize>,
        section: &'static str,
        name: String,
        what: &'static str,
    ) {
        let line = self.r.line(span.start);
        refs.push(Ref { section, name, file: self.r.source.name.clone(), line, key: self.key(key), what });
    }

    pub(super) fn span_of(&self, key: &str) -> Range<usize> {
        self.value(key).map(|v| v.span()).unwrap_or_default()
    }
}

pub(super) fn type_names() -> String {
    SessionType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
}

/// "64 GiB", "512MiB", "1.5 G", "1000000": bytes.
pub(super) fn bytes(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    };
    Some((number * factor).round()).filter(|b| b.is_finite())
}
