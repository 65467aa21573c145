//! A real part the tests start (a registry, a Slurm cluster, Jupyter from PyPI): used when
//! it started; otherwise the test is skipped with a NOTICE line on stderr (libtest counts it
//! passed, so read them), unless its `SESSIOND_REQUIRE_…=1` makes that a failure.

/// `started`, or `None` after a NOTICE (a panic when `env` is `1`); `what` names the part.
pub fn part<'a, T>(started: &'a Result<T, String>, what: &str, env: &str) -> Option<&'a T> {
    match started {
        Ok(part) => Some(part),
        Err(why) if std::env::var(env).is_ok_and(|v| v == "1") => {
            panic!("{what} is required ({env}=1) but cannot start: {why}")
        }
        Err(why) => {
            use std::io::Write;
            let line = format!("NOTICE: a test that needs {what} was SKIPPED and is reported as passed: {why}\n");
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            None
        }
    }
}
