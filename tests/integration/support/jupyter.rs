//! jupyter-server and ipykernel from PyPI, installed once per test build into a directory
//! of their own (`pip install --target`, with Debian's Python's own venv for pip): a
//! session puts it on its `PYTHONPATH`. Without PyPI a test that needs it is skipped with a
//! NOTICE, unless `SESSIOND_REQUIRE_JUPYTER=1` (set by `.ci/run`) makes that a failure.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// What is installed, as pip reads it.
const PACKAGES: [&str; 2] = ["jupyter-server>=2.14,<3", "ipykernel>=6.29,<8"];

static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The directory holding jupyter-server and ipykernel, or `None` (skipped, with a NOTICE).
pub fn lib() -> Option<&'static PathBuf> {
    super::required::part(LIB.get_or_init(install), "Jupyter", "SESSIOND_REQUIRE_JUPYTER")
}

fn install() -> Result<PathBuf, String> {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jupyter");
    let lib = root.join("lib");
    if lib.join("jupyter_server").is_dir() && lib.join("ipykernel").is_dir() {
        return Ok(lib);
    }
    let run = |c: &mut Command, what: &str| -> Result<(), String> {
        let out = c.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default()))
        }
    };
    std::fs::remove_dir_all(&root).ok();
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let venv = root.join("venv");
    run(Command::new("/usr/bin/python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv")?;
    let part = root.join("lib.part");
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "--target"])
            .arg(&part)
            .args(PACKAGES),
        "pip install jupyter-server ipykernel",
    )?;
    std::fs::rename(&part, &lib).map_err(|e| e.to_string())?;
    Ok(lib)
}
