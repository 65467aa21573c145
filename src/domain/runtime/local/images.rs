//! Images as local environments (`--images-file`, TOML): for each image name, the root its
//! sessions see, environment variables, the command an interactive session runs, and an
//! optional one-time prepare step (the session is PULLING while it runs; once it succeeded
//! on this machine it is not run again). An image without an entry runs on the host's
//! read-only system directories with nothing prepared.
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

use serde::Deserialize;

/// What an interactive session runs when its image names nothing: it stays up until stopped.
pub const KEEP_RUNNING: &str = "exec sleep infinity";

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Images {
    #[serde(default)]
    pub images: BTreeMap<String, LocalImage>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocalImage {
    /// `host` (the default) or a directory.
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub prepare: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The images file the demo ships (`images.toml`): used with `--demo` when no
/// `--images-file` is given.
pub const DEMO: &str = include_str!("../../../../images.toml");

impl Images {
    /// Reads an images file; the error names the file and the line.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let images: Self = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            match line {
                Some(l) => format!("line {l}: {}", e.message()),
                None => e.message().to_owned(),
            }
        })?;
        for (name, image) in &images.images {
            if let Some(root) = image.root.as_deref()
                && root != "host"
                && !Path::new(root).is_absolute()
            {
                return Err(format!("image {name}: root is `host` or an absolute directory, not {root:?}"));
            }
        }
        Ok(images)
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
    fn the_demo_images_file_is_valid() {
        let images = Images::parse(DEMO).expect("images.toml");
        assert_eq!(images.get("python:3.12").prepare.as_deref(), Some("python3 --version"));
        assert!(images.get("filebrowser:latest").interactive_command().contains("http.server"));
    }

    #[test]
    fn an_images_file_reads_and_names_its_mistakes() {
        let images = Images::parse(
            "[images.\"python:3.12\"]\nprepare = \"python3 --version\"\nenv = { A = \"1\" }\n[images.\"x\"]\nroot = \"/srv/x\"\n",
        )
        .expect("valid");
        assert_eq!(images.get("python:3.12").prepare.as_deref(), Some("python3 --version"));
        assert_eq!(images.get("python:3.12").env["A"], "1");
        assert_eq!(images.get("x").root_dir(), Some(PathBuf::from("/srv/x")));
        assert_eq!(images.get("unknown"), LocalImage::default(), "an image without an entry runs on the host");
        assert_eq!(images.get("unknown").interactive_command(), KEEP_RUNNING);

        let e = Images::parse("[images.a]\nroot = \"host\"\nprepared = \"x\"\n").expect_err("unknown key");
        assert!(e.starts_with("line 3:") && e.contains("prepared"), "{e}");
        let e = Images::parse("[images.a]\nroot = \"relative\"\n").expect_err("relative root");
        assert!(e.contains("absolute"), "{e}");
    }
}
