//! Images as local environments: for each image name, the root its sessions see,
//! environment variables, the command an interactive session runs, and an optional
//! one-time prepare step (the session is PULLING while it runs; once it succeeded on this
//! machine it is not run again). An image without one runs on the host's read-only system
//! directories with nothing prepared.
//!
//! They are declared with the image (`sessiond apply`, stored with it) or, overriding the
//! stored ones, in the `[images]` section of a file given with `--images-file`:
//!
//! ```toml
//! [images."python:3.12"]
//! root = "host"                      # or a directory holding a root file system
//! command = "exec sleep infinity"    # what an interactive session runs (the default)
//! prepare = "python3 --version"      # optional
//! env = { PYTHONUNBUFFERED = "1" }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What an interactive session runs when its image names nothing: it stays up until stopped.
pub const KEEP_RUNNING: &str = "exec sleep infinity";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Images {
    pub images: BTreeMap<String, LocalImage>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocalImage {
    /// `host` (the default) or a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl Images {
    /// Reads the `[images]` section of a declaration file; the error names the file, the
    /// line and the key of every problem.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = crate::domain::apply::file::read_text(path)?;
        Self::parse(&path.display().to_string(), &text)
    }

    pub fn parse(name: &str, text: &str) -> Result<Self, String> {
        let source = crate::domain::apply::Source { name: name.to_owned(), text: text.to_owned() };
        crate::domain::apply::file::local_images(&source)
            .map(|images| Self { images })
            .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
    }

    /// How `image` runs here.
    pub fn get(&self, image: &str) -> LocalImage {
        self.images.get(image).cloned().unwrap_or_default()
    }
}

impl LocalImage {
    /// The root directory, `None` for the host's.
    pub fn root_dir(&self) -> Option<PathBuf> {
        self.root.as_deref().filter(|r| *r != "host").map(PathBuf::from)
    }

    pub fn interactive_command(&self) -> String {
        self.command.clone().unwrap_or_else(|| KEEP_RUNNING.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_images_file_reads_and_names_its_mistakes() {
        let dir = tempfile::tempdir().expect("a root");
        let root = dir.path().display().to_string();
        let images = Images::parse(
            "f.toml",
            &format!("[images.\"python:3.12\"]\nprepare = \"python3 --version\"\nenv = {{ A = \"1\" }}\n[images.\"x\"]\nroot = \"{root}\"\n"),
        )
        .expect("valid");
        assert_eq!(images.get("python:3.12").prepare.as_deref(), Some("python3 --version"));
        assert_eq!(images.get("python:3.12").env["A"], "1");
        assert_eq!(images.get("x").root_dir(), Some(PathBuf::from(&root)));
        // Never the host's whole file system, nor a directory that is not there.
        let e = Images::parse("f.toml", "[images.a]\nroot = \"/\"\n").expect_err("the host's root");
        assert!(e.contains("may not be /"), "{e}");
        let e = Images::parse("f.toml", "[images.a]\nroot = \"/usr/..\"\n").expect_err("the host's root again");
        assert!(e.contains("may not be /"), "{e}");
        let e = Images::parse("f.toml", "[images.a]\nroot = \"/no/such/root\"\n").expect_err("missing");
        assert!(e.contains("not a directory"), "{e}");
        // Variable names as a launch takes them.
        for bad in ["\"A=B\"", "\"\"", "\"1X\"", "\"A\\u0000\""] {
            let e = Images::parse("f.toml", &format!("[images.a]\nenv = {{ {bad} = \"x\" }}\n")).expect_err(bad);
            assert!(e.contains("is not a variable name"), "{bad}: {e}");
        }
        let e = Images::parse("f.toml", "[images.a]\nenv = { A = \"x\\u0000y\" }\n").expect_err("NUL in a value");
        assert!(e.contains("NUL"), "{e}");
        assert_eq!(images.get("unknown"), LocalImage::default(), "an image without an entry runs on the host");
        assert_eq!(images.get("unknown").interactive_command(), KEEP_RUNNING);

        let e = Images::parse("f.toml", "[images.a]\nroot = \"host\"\nprepared = \"x\"\n").expect_err("unknown key");
        assert!(e.starts_with("f.toml:3: images.a.prepared: unknown key"), "{e}");
        let e = Images::parse("f.toml", "[images.a]\nroot = \"relative\"\n").expect_err("relative root");
        assert!(e.contains("absolute"), "{e}");
        let full = Images::parse("f.toml", "[domains.d]\n[images.a]\ntypes = [\"BATCH\"]\nprepare = \"true\"\n");
        assert_eq!(full.expect("a declaration file serves").get("a").prepare.as_deref(), Some("true"));
    }
}
