//! The TLS flags every subcommand shares, and where they lead: the
//! certificate directory (`--tls-dir`, made by `fleetq certs`), explicit
//! files, a bearer token, or `--insecure` plaintext.
//!
//! A process finds its own certificate in the directory by role:
//! `node-ID.pem` for `fleetq server --id ID`, `agent-CLUSTER.pem` for an
//! agent, `client.pem` for the CLI, each beside `ca.pem` and with its key
//! in `NAME-key.pem`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use fleetq_proto::tls::{Tls, TlsFiles};

/// How often certificate files (and the authorization policy) are checked
/// for changes.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = super::GLOBAL_OPTIONS)]
pub struct TlsArgs {
    /// Directory of the CA and certificates `fleetq certs` makes (ca.pem;
    /// node-ID.pem, agent-CLUSTER.pem or client.pem, each with NAME-key.pem)
    /// [default: ~/.fleetq/tls, where `fleetq dev` puts its own].
    #[arg(long, global = true, env = "FLEETQ_TLS_DIR", value_name = "DIR")]
    pub tls_dir: Option<PathBuf>,
    /// CA bundle to trust (instead of DIR/ca.pem).
    #[arg(long, global = true, env = "FLEETQ_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Own certificate (instead of the one in DIR); needs --tls-key.
    #[arg(long, global = true, env = "FLEETQ_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// Own private key; needs --tls-cert.
    #[arg(long, global = true, env = "FLEETQ_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Bearer token (clients): acts as the tenant the server's
    /// authorization policy maps it to; no client certificate needed.
    #[arg(
        long,
        global = true,
        env = "FLEETQ_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Plaintext instead of mutual TLS: no encryption, no authentication,
    /// everyone may do everything. For loopback experiments only.
    #[arg(long, global = true, env = "FLEETQ_INSECURE", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure: bool,
}

/// Which certificate in the directory is this process's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Node(u64),
    Agent(String),
    Client,
}

impl Role {
    fn stem(&self) -> String {
        match self {
            Role::Node(id) => format!("node-{id}"),
            Role::Agent(c) => format!("agent-{c}"),
            Role::Client => "client".to_string(),
        }
    }
}

/// `~/.fleetq/tls`.
pub fn default_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".fleetq").join("tls"))
}

impl TlsArgs {
    /// The directory in use: --tls-dir, else the default.
    pub fn dir(&self) -> Option<PathBuf> {
        self.tls_dir.clone().or_else(default_dir)
    }

    /// These flags over a config file's keys of the same names (no token:
    /// daemons have none).
    pub fn over(&self, file: &TlsArgs) -> TlsArgs {
        TlsArgs {
            tls_dir: self.tls_dir.clone().or(file.tls_dir.clone()),
            tls_ca: self.tls_ca.clone().or(file.tls_ca.clone()),
            tls_cert: self.tls_cert.clone().or(file.tls_cert.clone()),
            tls_key: self.tls_key.clone().or(file.tls_key.clone()),
            token: None,
            insecure: self.insecure || file.insecure,
        }
    }

    /// The files `role` uses; errors name the flag.
    pub fn files(&self, role: &Role) -> Result<TlsFiles, String> {
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some(Some((c.clone(), k.clone()))),
            (Some(_), None) => return Err("--tls-cert needs --tls-key".into()),
            (None, Some(_)) => return Err("--tls-key needs --tls-cert".into()),
            (None, None) => None,
        };
        let dir = self.dir();
        let from_dir = |dir: &Option<PathBuf>| -> Result<TlsFiles, String> {
            let dir = dir
                .as_ref()
                .ok_or("--tls-dir: no directory given and HOME is not set")?;
            if !dir.is_dir() {
                return Err(format!(
                    "--tls-dir: {} does not exist; make certificates with `fleetq certs init` and `fleetq certs issue` (or run `fleetq dev`, which makes its own), or pass --insecure for plaintext",
                    dir.display()
                ));
            }
            Ok(TlsFiles::in_dir(dir, &role.stem()))
        };
        let mut files = match (&self.tls_ca, identity) {
            (Some(ca), Some(identity)) => TlsFiles {
                ca: ca.clone(),
                identity,
            },
            (Some(ca), None) => TlsFiles {
                ca: ca.clone(),
                identity: from_dir(&dir).ok().and_then(|f| f.identity),
            },
            (None, identity) => {
                let mut f = from_dir(&dir)?;
                if let Some(identity) = identity {
                    f.identity = identity;
                }
                f
            }
        };
        // A client with a token needs no certificate of its own.
        if role == &Role::Client && self.token.is_some() {
            if let Some((cert, _)) = &files.identity {
                if self.tls_cert.is_none() && !cert.exists() {
                    files.identity = None;
                }
            }
        }
        if role != &Role::Client && files.identity.is_none() {
            return Err(format!("--tls-cert: a {role:?} needs its own certificate"));
        }
        Ok(files)
    }

    /// The TLS configuration for `role`, or `None` with `--insecure`
    /// (servers and agents log a warning then).
    pub fn resolve(&self, role: &Role) -> Result<Option<Tls>, String> {
        if self.insecure {
            if role != &Role::Client {
                tracing::warn!("--insecure: plaintext gRPC, no authentication, every caller may do everything; use only on a trusted loopback");
            }
            return Ok(None);
        }
        let files = self.files(role)?;
        Tls::load(files).map(Some)
    }
}
