//! Debian's nginx for the benchmarks that stand sessiond beside it: started in the
//! foreground with a configuration of the benchmark's, stopped when dropped.

use std::path::Path;
use std::process::{Child, Command};

pub const NGINX: &str = "/usr/sbin/nginx";

/// An nginx of Debian's, in the foreground; stopped when dropped.
pub struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        // Its fast shutdown: the master stops its workers, then itself.
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).expect("a pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

pub fn nginx(prefix: &Path, conf: &str) -> Nginx {
    for d in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir_all(prefix.join(d)).expect("nginx's directories");
    }
    let file = prefix.join("nginx.conf");
    std::fs::write(&file, conf).expect("nginx's configuration");
    #[allow(clippy::zombie_processes)] // `Nginx` waits for it when dropped
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(&file)
        .arg("-e")
        .arg(prefix.join("error.log"))
        .args(["-g", "daemon off;"])
        .spawn()
        .expect("nginx");
    Nginx(child)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port()
}
