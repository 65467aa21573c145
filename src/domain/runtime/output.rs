//! A session's output copied into its log, for every engine whose sessions write their
//! output to a file this server reads: new lines since the last copy, a tick's share at a
//! time, capped per log, cleaned of what the database cannot store. How far it was copied is
//! kept in a file of its own beside it, written once the lines are committed.

use std::path::{Path, PathBuf};

use super::local::files;

/// Most output one tick copies into a session's log (an ended session's end waits for the
/// rest: at most 8 ticks for the largest output kept).
const INGEST_BYTES: usize = 1 << 20;
/// Longest log line kept (longer ones are cut).
const MAX_LINE: usize = 4096;

/// How much of a session's output is in its log: bytes of `output.log`, and lines.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Copied {
    offset: u64,
    lines: u64,
}

/// Most lines one tick copies from one session's output.
const LINES_PER_TICK: usize = 5_000;
/// Most lines of output a session's log keeps; the rest is read and dropped, with a note.
const MAX_OUTPUT_LINES: u64 = 100_000;

/// New lines of a session's output since the last copy: complete lines only, unless `all`
/// (the session ended), which takes the last line too; `rest` when more is left to copy.
pub struct Output {
    pub lines: Vec<String>,
    pub copied: Option<(PathBuf, Copied)>,
    pub rest: bool,
}

/// The new output of `output`, copied so far as `ingested` says.
pub fn new_output(output: &Path, ingested: &Path, all: bool) -> Output {
    let before: Copied = files::read_json(ingested).unwrap_or_default();
    let (lines, copied) = read_output(output, before, all);
    let len = std::fs::metadata(output).map_or(0, |m| m.len());
    let at = copied.map_or(before.offset, |c| c.offset);
    Output { lines, copied: copied.map(|c| (ingested.to_owned(), c)), rest: at < len }
}

fn read_output(output: &Path, from: Copied, all: bool) -> (Vec<String>, Option<Copied>) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(output) else { return (Vec::new(), None) };
    if f.seek(SeekFrom::Start(from.offset)).is_err() {
        return (Vec::new(), None);
    }
    let mut buf = Vec::new();
    if f.take(INGEST_BYTES as u64).read_to_end(&mut buf).is_err() || buf.is_empty() {
        return (Vec::new(), None);
    }
    if from.lines >= MAX_OUTPUT_LINES {
        // The log is full: what comes is read and dropped.
        return (Vec::new(), Some(Copied { offset: from.offset + buf.len() as u64, lines: from.lines }));
    }
    let mut end = if all && buf.len() < INGEST_BYTES {
        buf.len()
    } else {
        match buf.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if buf.len() >= INGEST_BYTES => buf.len(), // one line longer than a tick's copy
            None => return (Vec::new(), None),
        }
    };
    // At most a tick's share of lines, and no more than the log keeps.
    let budget = usize::try_from(MAX_OUTPUT_LINES - from.lines).unwrap_or(usize::MAX).min(LINES_PER_TICK);
    if let Some((i, _)) = buf[..end].iter().enumerate().filter(|(_, b)| **b == b'\n').nth(budget.saturating_sub(1))
        && i + 1 < end
    {
        end = i + 1;
    }
    let mut lines: Vec<String> = String::from_utf8_lossy(&buf[..end])
        .lines()
        .map(|l| {
            // PostgreSQL's text holds no NUL.
            let l = l.replace('\0', "\u{FFFD}");
            if l.len() > MAX_LINE { l.chars().take(MAX_LINE).collect() } else { l }
        })
        .collect();
    let total = from.lines + lines.len() as u64;
    if total >= MAX_OUTPUT_LINES {
        lines.push(format!("[the log keeps {MAX_OUTPUT_LINES} lines of output: the rest is dropped]"));
    }
    (lines, Some(Copied { offset: from.offset + end as u64, lines: total }))
}
