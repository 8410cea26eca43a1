//! Mutual TLS on every fleetq link (server-server, agent-server,
//! client-server), with rustls and the `ring` provider.
//!
//! Each process has a CA bundle it trusts and, except token-only clients,
//! its own certificate and key ([`TlsFiles`]). [`Tls`] holds the rustls
//! configurations built from those files and rebuilds them when the files
//! change on disk ([`Tls::spawn_reloader`]), so a rotated certificate takes
//! effect for new connections without a restart. A file that fails to load
//! during a reload is logged and the previous configuration stays in use.
//!
//! Who a certificate names is [`Identity`]: one `spiffe://fleetq/...` URI
//! SAN. [`accept`] wraps a server's TCP connections; [`TlsConnector`] opens
//! client channels.

mod accept;
mod connect;
mod identity;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use accept::{accept, HandshakeRefused, HANDSHAKE_TIMEOUT};
pub use connect::{dial, tls_channel, TlsConnector};
pub use identity::{Identity, IdentityCache, TRUST_DOMAIN};

/// Where a process finds its TLS material (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates this process trusts for its peers.
    pub ca: PathBuf,
    /// This process's certificate chain and private key; a client that
    /// authenticates with a bearer token has none.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// `ca.pem`, `NAME.pem` and `NAME-key.pem` in `dir`, the layout
    /// `fleetq certs` writes.
    pub fn in_dir(dir: &Path, name: &str) -> TlsFiles {
        TlsFiles {
            ca: dir.join("ca.pem"),
            identity: Some((
                dir.join(format!("{name}.pem")),
                dir.join(format!("{name}-key.pem")),
            )),
        }
    }

    fn read(&self) -> Result<Vec<Vec<u8>>, String> {
        let mut paths = vec![&self.ca];
        if let Some((c, k)) = &self.identity {
            paths.push(c);
            paths.push(k);
        }
        paths
            .into_iter()
            .map(|p| std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display())))
            .collect()
    }
}

/// The rustls configurations built from one reading of [`TlsFiles`].
struct Loaded {
    contents: Vec<Vec<u8>>,
    client: Arc<ClientConfig>,
    /// Absent for a process without its own certificate.
    server: Option<Arc<ServerConfig>>,
}

/// TLS configurations that follow their files on disk.
#[derive(Clone)]
pub struct Tls {
    files: TlsFiles,
    current: Arc<RwLock<Arc<Loaded>>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(files: &TlsFiles, contents: Vec<Vec<u8>>) -> Result<Loaded, String> {
    let ca_path = files.ca.display();
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&contents[0]) {
        let cert = cert.map_err(|e| format!("{ca_path}: not a PEM certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("{ca_path}: unusable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{ca_path}: no CA certificate in the file"));
    }
    let roots = Arc::new(roots);
    let versions = rustls::DEFAULT_VERSIONS;
    let client_builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS settings: {e}"))?
        .with_root_certificates(Arc::clone(&roots));
    let (mut client, server) = match &files.identity {
        None => (client_builder.with_no_client_auth(), None),
        Some((cert_path, key_path)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&contents[1])
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{}: not a PEM certificate: {e}", cert_path.display()))?;
            if chain.is_empty() {
                return Err(format!(
                    "{}: no certificate in the file",
                    cert_path.display()
                ));
            }
            Identity::of_certificate(&chain[0])
                .map_err(|e| format!("{}: {e}", cert_path.display()))?;
            let key = PrivateKeyDer::from_pem_slice(&contents[2])
                .map_err(|e| format!("{}: not a PEM private key: {e}", key_path.display()))?;
            let client = client_builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| format!("{}: {e}", key_path.display()))?;
            // Clients without a certificate may connect (they present a
            // bearer token instead); the authorization layer refuses any
            // request that carries neither.
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("{ca_path}: {e}"))?;
            let mut server = ServerConfig::builder_with_provider(provider())
                .with_protocol_versions(versions)
                .map_err(|e| format!("TLS settings: {e}"))?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key)
                .map_err(|e| {
                    format!(
                        "{} and {} do not make a usable pair: {e}",
                        cert_path.display(),
                        key_path.display()
                    )
                })?;
            server.alpn_protocols = vec![b"h2".to_vec()];
            (client, Some(Arc::new(server)))
        }
    };
    client.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Loaded {
        contents,
        client: Arc::new(client),
        server,
    })
}

impl Tls {
    /// Loads `files`; the error names the file and what is wrong with it.
    pub fn load(files: TlsFiles) -> Result<Tls, String> {
        let loaded = build(&files, files.read()?)?;
        Ok(Tls {
            files,
            current: Arc::new(RwLock::new(Arc::new(loaded))),
        })
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    fn loaded(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The configuration for outgoing connections.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.loaded().client.clone()
    }

    /// The configuration for incoming connections; `None` without an own
    /// certificate.
    pub fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.loaded().server.clone()
    }

    /// Rereads the files; `Ok(true)` when they changed and the new
    /// configuration is in use, `Err` (previous configuration kept) when
    /// they changed into something unusable.
    pub fn reload(&self) -> Result<bool, String> {
        let contents = self.files.read()?;
        if contents == self.loaded().contents {
            return Ok(false);
        }
        let loaded = build(&self.files, contents)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
        Ok(true)
    }

    /// Checks the files every `every` and reloads them when they change
    /// (certificate rotation without a restart). Ends when every clone of
    /// this `Tls` is gone. Needs a tokio runtime.
    pub fn spawn_reloader(&self, every: Duration) {
        let weak: Weak<RwLock<Arc<Loaded>>> = Arc::downgrade(&self.current);
        let files = self.files.clone();
        let mut failing = false;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(current) = weak.upgrade() else {
                    return;
                };
                let tls = Tls {
                    files: files.clone(),
                    current,
                };
                match tls.reload() {
                    Ok(true) => {
                        failing = false;
                        tracing::info!(ca = %files.ca.display(), "TLS certificates reloaded");
                    }
                    Ok(false) => failing = false,
                    Err(e) if !failing => {
                        failing = true;
                        tracing::error!(error = %e, "TLS certificates changed but cannot be loaded; the previous ones stay in use");
                    }
                    Err(_) => {}
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA and a leaf for `identity`, as PEM (ca, cert, key).
    fn material(identity: &Identity) -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("ca");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let mut leaf = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
        leaf.subject_alt_names.push(rcgen::SanType::URI(
            rcgen::string::Ia5String::try_from(identity.uri()).expect("uri"),
        ));
        let cert = leaf.signed_by(&key, &issuer).expect("leaf");
        (ca_cert.pem(), cert.pem(), key.serialize_pem())
    }

    fn write(dir: &Path, (ca, cert, key): &(String, String, String)) {
        std::fs::write(dir.join("ca.pem"), ca).expect("write");
        std::fs::write(dir.join("n.pem"), cert).expect("write");
        std::fs::write(dir.join("n-key.pem"), key).expect("write");
    }

    #[test]
    fn reload_follows_the_files_and_keeps_the_old_on_garbage() {
        let dir = tempfile::tempdir().expect("dir");
        write(dir.path(), &material(&Identity::Node(1)));
        let tls = Tls::load(TlsFiles::in_dir(dir.path(), "n")).expect("loads");
        let first = tls.server_config().expect("server config");
        assert_eq!(tls.reload(), Ok(false), "unchanged files");
        assert!(Arc::ptr_eq(&first, &tls.server_config().expect("same")));

        write(dir.path(), &material(&Identity::Node(1)));
        assert_eq!(tls.reload(), Ok(true), "rotated files");
        let second = tls.server_config().expect("server config");
        assert!(
            !Arc::ptr_eq(&first, &second),
            "the new configuration is in use"
        );

        std::fs::write(dir.path().join("n.pem"), "not a certificate").expect("write");
        let err = tls.reload().expect_err("garbage");
        assert!(err.contains("n.pem"), "{err}");
        assert!(Arc::ptr_eq(&second, &tls.server_config().expect("kept")));
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let err = Tls::load(TlsFiles::in_dir(dir.path(), "n")).expect_err("missing");
        assert!(err.contains("ca.pem"), "{err}");
        let m = material(&Identity::Agent("east".into()));
        write(dir.path(), &m);
        std::fs::write(dir.path().join("n-key.pem"), "-----BEGIN NOTHING-----").expect("write");
        let err = Tls::load(TlsFiles::in_dir(dir.path(), "n")).expect_err("bad key");
        assert!(err.contains("n-key.pem"), "{err}");
        // A certificate that names no fleetq identity is refused at load.
        let key = rcgen::KeyPair::generate().expect("key");
        let plain = rcgen::CertificateParams::new(vec!["localhost".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        write(dir.path(), &(m.0.clone(), plain.pem(), key.serialize_pem()));
        let err = Tls::load(TlsFiles::in_dir(dir.path(), "n")).expect_err("no identity");
        assert!(err.contains("names no fleetq identity"), "{err}");
    }
}
