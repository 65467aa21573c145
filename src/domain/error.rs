//! The error type of the domain layer. Each variant is a public outcome, except
//! `Internal`, whose detail is logged and never shown to a client.

use std::sync::Arc;

/// One problem found in a request's input, with the path of the field it concerns.
#[derive(Clone, Debug, PartialEq)]
pub struct InputProblem {
    /// Stable machine-readable code, e.g. `INVALID_NAME`.
    pub code: String,
    /// The offending field in the domain's terms, e.g. `name`, `resources[1]` or
    /// `columns[2]`; each transport maps it to its own path or parameter.
    pub field: Option<String>,
    pub message: String,
}

impl InputProblem {
    pub fn new(code: &str, field: impl Into<Option<String>>, message: impl Into<String>) -> Self {
        Self { code: code.to_owned(), field: field.into(), message: message.into() }
    }

    /// The problem with a list in `field` of `len` items, if it has more than `max`:
    /// `TOO_MANY`, saying the cap (`what` names the items). Every input list has one.
    pub fn too_many(field: &str, len: usize, max: usize, what: &str) -> Option<Self> {
        (len > max).then(|| Self::new("TOO_MANY", Some(field.to_owned()), format!("at most {max} {what}")))
    }

    /// The problem with `text` in `field` if it holds a control character: NUL, which
    /// PostgreSQL cannot store and SQLite cuts text at, or any other C0 or C1 control
    /// (invisible in the page, a trap in logs and exported files), or a bidirectional control
    /// ([`is_bidi_control`]). `Lines` text (a command, an environment value) may hold tabs
    /// and line breaks. Refused alike on both
    /// databases, before the text reaches either.
    pub fn control_characters(field: &str, text: &str, kind: Text) -> Option<Self> {
        let allowed = |c: char| kind == Text::Lines && matches!(c, '\t' | '\n' | '\r');
        let found = text.chars().find(|&c| (c.is_control() && !allowed(c)) || is_bidi_control(c))?;
        let (code, what) = if found == '\0' {
            ("NUL_CHARACTER", "a NUL character".to_owned())
        } else if is_bidi_control(found) {
            ("CONTROL_CHARACTER", format!("the bidirectional control U+{:04X}", u32::from(found)))
        } else {
            ("CONTROL_CHARACTER", format!("the control character U+{:04X}", u32::from(found)))
        };
        let allowed = if kind == Text::Lines { " (tabs and line breaks are allowed)" } else { "" };
        Some(Self::new(code, Some(field.to_owned()), format!("text may not contain {what}{allowed}")))
    }
}

/// Whether `c` reorders how the text around it shows (embeddings, overrides, isolates and
/// marks): a name holding one can read as another name, or hide what a command does.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// What control characters a text field may hold: see [`InputProblem::control_characters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// One line: a name, an image, a key. No control character at all.
    Line,
    /// A command or a value: tabs and line breaks allowed.
    Lines,
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum DomainError {
    #[error("authentication required: send a valid bearer token")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(String),
    /// What was looked for, e.g. "session". Invisible things are reported the same way.
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{}", summarize(.0))]
    BadInput(Vec<InputProblem>),
    #[error("a live session named `{0}` already exists")]
    NameTaken(String),
    #[error("{0}")]
    QuotaExceeded(String),
    /// Why, and the slot no agent can ever hold (none: no agent holds all of it at once).
    #[error("{0}")]
    NeverFits(String, Option<String>),
    #[error("{0}")]
    LimitExceeded(String),
    /// A session's expiry that may not be pushed back (further).
    #[error("{0}")]
    ExtensionLimit(String),
    /// An idempotency key sent again with another launch.
    #[error("this idempotency key was used for a different launch; use a new key for a new launch")]
    IdempotencyKeyReused,
    /// A live feed whose consumer fell too far behind, ended after the event with this
    /// sequence number: everything up to it was delivered; resume after it.
    #[error("the subscription fell too far behind and was ended; subscribe again after the cursor of this error")]
    Lagged(i64),
    /// The database cannot be reached now (down, restarting, out of connections, locked
    /// past the busy timeout): the same request may succeed shortly. The detail is logged.
    #[error("the database cannot be reached now; retry shortly")]
    Unavailable(Arc<dyn std::error::Error + Send + Sync>),
    /// Anything else the client cannot fix: database failures, broken invariants.
    #[error("internal error")]
    Internal(Arc<dyn std::error::Error + Send + Sync>),
}

fn summarize(problems: &[InputProblem]) -> String {
    match problems {
        [one] => one.message.clone(),
        many => {
            let (shown, more) = shown(many);
            let listed = shown.iter().map(|p| p.message.as_str()).collect::<Vec<_>>().join("; ");
            let more = if more > 0 { format!("; and {more} more") } else { String::new() };
            format!("{} problems in the input: {listed}{more}", many.len())
        }
    }
}

/// The most problems an answer lists: a request with thousands of bad elements gets a short
/// answer, not one problem per element.
pub const MAX_PROBLEMS_SHOWN: usize = 20;

/// The problems an answer lists, and how many more there are.
pub fn shown(problems: &[InputProblem]) -> (&[InputProblem], usize) {
    let n = problems.len().min(MAX_PROBLEMS_SHOWN);
    (&problems[..n], problems.len() - n)
}

impl DomainError {
    /// One bad-input problem.
    pub fn bad_input(code: &str, field: impl Into<Option<String>>, message: impl Into<String>) -> Self {
        Self::BadInput(vec![InputProblem::new(code, field, message)])
    }

    pub fn internal(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Arc::new(err))
    }

    /// An invariant the code relies on does not hold: a bug or corrupted data.
    pub fn invariant(message: impl Into<String>) -> Self {
        Self::Internal(Arc::new(Invariant(message.into())))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invariant violated: {0}")]
struct Invariant(String);

impl From<sea_orm::DbErr> for DomainError {
    fn from(err: sea_orm::DbErr) -> Self {
        if unreachable(&err) { Self::Unavailable(Arc::new(err)) } else { Self::internal(err) }
    }
}

/// Whether a database error says the database is out of reach rather than that the
/// statement failed.
fn unreachable(err: &sea_orm::DbErr) -> bool {
    use sea_orm::sqlx::Error as Sqlx;
    use sea_orm::{DbErr, RuntimeErr};
    let sqlx = match err {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return true,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => e,
        _ => return false,
    };
    match sqlx.as_ref() {
        Sqlx::Io(_)
        | Sqlx::Tls(_)
        | Sqlx::Protocol(_)
        | Sqlx::PoolTimedOut
        | Sqlx::PoolClosed
        | Sqlx::WorkerCrashed => true,
        // PostgreSQL: connection exceptions (class 08), shutting down or starting up (57P01–
        // 57P03). SQLite: busy or locked past the busy timeout (5, 6).
        Sqlx::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || ["57P01", "57P02", "57P03", "5", "6"].contains(&c.as_ref())),
        _ => false,
    }
}

impl From<sea_orm::TransactionError<DomainError>> for DomainError {
    fn from(err: sea_orm::TransactionError<DomainError>) -> Self {
        match err {
            sea_orm::TransactionError::Connection(db) => db.into(),
            sea_orm::TransactionError::Transaction(e) => e,
        }
    }
}

pub type DomainResult<T> = Result<T, DomainError>;

/// The public codes of errors (`extensions.code` in GraphQL, `error.code` in other
/// answers): one per kind of [`DomainError`], and a few of the transports'.
pub mod codes {
    pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
    pub const FORBIDDEN: &str = "FORBIDDEN";
    pub const NOT_FOUND: &str = "NOT_FOUND";
    pub const BAD_USER_INPUT: &str = "BAD_USER_INPUT";
    pub const NAME_TAKEN: &str = "NAME_TAKEN";
    pub const QUOTA_EXCEEDED: &str = "QUOTA_EXCEEDED";
    pub const NEVER_FITS: &str = "NEVER_FITS";
    pub const LIMIT_EXCEEDED: &str = "LIMIT_EXCEEDED";
    pub const EXTENSION_LIMIT: &str = "EXTENSION_LIMIT";
    pub const LAGGED: &str = "LAGGED";
    pub const IDEMPOTENCY_KEY_REUSED: &str = "IDEMPOTENCY_KEY_REUSED";
    /// The server cannot answer now (its database is unreachable, or it is at its in-flight
    /// cap): HTTP 503 with `Retry-After`.
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    pub const INTERNAL: &str = "INTERNAL";

    /// The message a client sees for any internal error; the detail goes to the log.
    pub const INTERNAL_MESSAGE: &str = "internal error";
}

/// The API's spelling of a domain field name (GraphQL's, and the export's query
/// parameters'): `startup_command` → `startupCommand`,
/// `resources[1]` → `resources[1]`.
pub fn camel(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The public code of `err`.
pub fn code_of(err: &DomainError) -> &'static str {
    use codes::*;
    match err {
        DomainError::Unauthenticated => UNAUTHENTICATED,
        DomainError::Forbidden(_) => FORBIDDEN,
        DomainError::NotFound(_) => NOT_FOUND,
        DomainError::BadInput(_) => BAD_USER_INPUT,
        DomainError::NameTaken(_) => NAME_TAKEN,
        DomainError::QuotaExceeded(_) => QUOTA_EXCEEDED,
        DomainError::NeverFits(..) => NEVER_FITS,
        DomainError::LimitExceeded(_) => LIMIT_EXCEEDED,
        DomainError::ExtensionLimit(_) => EXTENSION_LIMIT,
        DomainError::Lagged(_) => LAGGED,
        DomainError::IdempotencyKeyReused => IDEMPOTENCY_KEY_REUSED,
        DomainError::Unavailable(_) => UNAVAILABLE,
        DomainError::Internal(_) => INTERNAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_named() {
        let p = |t: &str, k| InputProblem::control_characters("f", t, k).map(|p| p.code);
        assert_eq!(p("plain text ünïcode", Text::Line), None);
        assert_eq!(p("a\0b", Text::Line).as_deref(), Some("NUL_CHARACTER"));
        assert_eq!(p("a\0b", Text::Lines).as_deref(), Some("NUL_CHARACTER"));
        assert_eq!(p("a\tb", Text::Line).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("a\tb\r\nc", Text::Lines), None);
        assert_eq!(p("\u{1b}[31m", Text::Lines).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("\u{7f}", Text::Line).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("\u{85}", Text::Lines).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("a\u{202E}b", Text::Line).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("a\u{2067}b\n", Text::Lines).as_deref(), Some("CONTROL_CHARACTER"));
        assert_eq!(p("\u{200F}", Text::Line).as_deref(), Some("CONTROL_CHARACTER"));
        let message = InputProblem::control_characters("f", "\u{1b}", Text::Line).expect("a problem").message;
        assert!(message.contains("U+001B"), "{message}");
    }
}
